"""The compiled load generator of ``ragtime bench ceiling``: wrk (Debian's ``wrk`` package),
driven through its LuaJIT scripting (``open_loop.lua`` beside this module).

One ``WrkPhase`` is one wrk process: Poisson arrivals at a fixed mean rate against one server for
some seconds, each request a body of a file (``write_bodies``), its connections opened before the
arrivals begin (a lead-in that is not measured). wrk's latency is the whole response: from
writing the request to the response's last byte (wrk.c, ``response_complete``); it has no hook
at the first byte. Here its output is read (``parse_wrk_output``: the script's ``ragtime-wrk``
line) into the phase's counts, errors and percentiles.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, Field

SCRIPT = Path(__file__).with_name("open_loop.lua")
TAG = "ragtime-wrk "
#: The connections of a phase: enough for this many seconds of arrivals in flight at once (an
#: arrival that finds every one busy leaves late), at least ``MIN_CONNECTIONS``.
CONNECTION_WINDOW_S = 0.25
MIN_CONNECTIONS = 16
MAX_CONNECTIONS = 1024


class WrkMissing(RuntimeError):
    """wrk is not installed (``apt-get install wrk``; ``make bench`` installs it)."""


class LatencyMs(BaseModel):
    """wrk's latency of the whole response, in milliseconds (its histogram has microseconds)."""

    n: int
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p999: float | None = Field(default=None, description="The 99.9th percentile.")
    mean: float | None = None
    min: float | None = None
    max: float | None = None


class WrkPhase(BaseModel):
    """One wrk run: a target at one offered rate."""

    target: str
    rate: float = Field(description="The mean arrival rate asked for, requests per second.")
    seconds: float = Field(description="Measured seconds (after the lead-in).")
    connections: int
    sent: int = Field(description="Requests written (the script's count).")
    answered: int = Field(description="Responses complete (wrk's count), good or bad.")
    bad: int = Field(description="Complete responses other than a 200 ending in `done`.")
    transport_errors: int = Field(description="wrk's connect, read and write errors.")
    timeouts: int = Field(description="wrk's timeouts (no response within --timeout).")
    late: int = Field(
        description="Arrivals sent more than 1 ms after they were due: every connection was busy."
    )
    late_ms_max: float
    latency_ms: LatencyMs
    error_ratio: float = Field(
        description="Bad responses, transport errors and timeouts, of the requests that ended."
    )
    answered_rps: float = Field(description="Good responses per measured second.")
    server_cpu_ms: float | None = Field(
        default=None,
        description="CPU time the server's processes used during the phase, per complete "
        "response, ms (Linux /proc; None elsewhere): what one request costs it.",
    )


def _ratios(phase: WrkPhase, seconds: float) -> WrkPhase:
    """``phase`` over ``seconds`` measured, its error ratio and answered rate worked out."""
    failed = phase.bad + phase.transport_errors + phase.timeouts
    ended = phase.answered + phase.transport_errors
    good = phase.answered - phase.bad
    return phase.model_copy(
        update={
            "seconds": round(seconds, 3),
            "error_ratio": round(failed / ended, 4) if ended else 1.0,
            "answered_rps": round(good / seconds, 2) if seconds > 0 else 0.0,
        }
    )


def wrk_binary() -> str:
    """The path of ``wrk``; raises ``WrkMissing`` when it is not installed."""
    path = shutil.which("wrk")
    if path is None:
        raise WrkMissing("wrk is not installed: apt-get install wrk (make bench installs it)")
    return path


def wrk_version(binary: str | None = None) -> str:
    """wrk's version line without its copyright, e.g. ``wrk debian/4.1.0-3+b2 [epoll]``."""
    done = subprocess.run(
        [binary or wrk_binary(), "-v"], capture_output=True, text=True, timeout=10
    )  # wrk -v prints its version, then its usage, and exits 1
    first = (done.stdout or done.stderr).splitlines()[0] if (done.stdout or done.stderr) else ""
    return first.split(" Copyright")[0].strip() or "unknown"


def connections_for(rate: float) -> int:
    """Connections for ``CONNECTION_WINDOW_S`` of arrivals at ``rate``, within the bounds."""
    wanted = math.ceil(rate * CONNECTION_WINDOW_S)
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, wanted))


def write_bodies(questions: Sequence[str], path: Path) -> Path:
    """One streamed ``POST /v1/ask`` JSON body per question, a line each, for the script."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"question": q, "stream": True}) for q in questions]
    path.write_text("\n".join(lines) + "\n")
    return path


def wrk_command(
    url: str,
    *,
    bodies: Path,
    rate: float,
    seconds: float,
    connections: int,
    key: str | None = None,
    seed: int = 0,
    lead_s: float = 0.5,
    timeout_s: float = 10.0,
    binary: str = "wrk",
) -> list[str]:
    """The wrk command line of one phase (one thread: the client keeps to one core)."""
    argv = [binary, "-t1", f"-c{connections}", f"-d{math.ceil(seconds + lead_s)}s"]
    argv += [f"--timeout={math.ceil(timeout_s)}s", "-H", "Content-Type: application/json"]
    if key:
        argv += ["-H", f"Authorization: Bearer {key}"]
    argv += ["-s", str(SCRIPT), f"{url.rstrip('/')}/v1/ask", "--"]
    argv += [str(bodies), f"{rate:g}", str(seed), "1", f"{lead_s * 1000:g}"]
    return argv


def parse_wrk_output(stdout: str, *, target: str, rate: float, connections: int) -> WrkPhase:
    """The phase that wrk's output reports (the script's ``ragtime-wrk`` JSON line)."""
    line = next((x for x in stdout.splitlines() if x.startswith(TAG)), None)
    if line is None:
        raise ValueError(f"no {TAG.strip()!r} line in wrk's output:\n{stdout[-2000:]}")
    data = json.loads(line[len(TAG) :])
    errors, lat = data["errors"], data["latency_us"]
    n = int(data["requests"])

    def ms(key: str) -> float | None:
        return round(lat[key] / 1000.0, 3) if n else None

    latency = LatencyMs(
        n=n, p50=ms("p50"), p90=ms("p90"), p99=ms("p99"), p999=ms("p99.9"),
        mean=ms("mean"), min=ms("min"), max=ms("max"),
    )  # fmt: skip
    phase = WrkPhase(
        target=target,
        rate=rate,
        seconds=round(data["duration_us"] / 1e6, 3),
        connections=connections,
        sent=int(data["sent"]),
        answered=n,
        bad=int(data["bad"]),
        transport_errors=int(errors["connect"] + errors["read"] + errors["write"]),
        timeouts=int(errors["timeout"]),
        late=int(data["late"]),
        late_ms_max=float(data["late_ms_max"]),
        latency_ms=latency,
        error_ratio=0.0,
        answered_rps=0.0,
    )
    return _ratios(phase, phase.seconds)


def run_wrk(
    target: str,
    url: str,
    *,
    bodies: Path,
    rate: float,
    seconds: float,
    key: str | None = None,
    seed: int = 0,
    lead_s: float = 0.5,
    timeout_s: float = 10.0,
) -> WrkPhase:
    """Run one phase against ``url`` and read what wrk measured; ``seconds`` exclude the
    lead-in, which the reported duration leaves out too."""
    connections = connections_for(rate)
    argv = wrk_command(
        url, bodies=bodies, rate=rate, seconds=seconds, connections=connections, key=key,
        seed=seed, lead_s=lead_s, timeout_s=timeout_s, binary=wrk_binary(),
    )  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + lead_s + 60)
    if done.returncode != 0:
        raise RuntimeError(f"wrk exited {done.returncode}: {done.stderr[-2000:]}")
    phase = parse_wrk_output(done.stdout, target=target, rate=rate, connections=connections)
    return _ratios(phase, max(phase.seconds - lead_s, 0.001))
