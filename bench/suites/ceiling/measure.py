"""``ragtime bench ceiling``'s run: the floor and ragtime started once each, then, run after run,
both at a low rate by the bench's own client and both swept with wrk, side by side.

In a sweep the two targets take turns rate by rate (floor then ragtime, then ragtime then
floor, ...), so that drift on a noisy machine falls on both; a target leaves the sweep after
``patience`` consecutive rates that failed the ceiling's rule (``leaves``). The low-rate pairs
come first in each run (they also warm both servers up): questions never asked before (a
numbered variant of a bench question per request, ``fresh_questions``: no cache of ragtime's
can serve one), then one question over and over.
"""

from __future__ import annotations

import asyncio
import math
import os
import shlex
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench.harness.results import point_holds
from bench.suites.ceiling.results import (
    CeilingBench,
    CeilingRun,
    LowRate,
    Workers,
    aggregate,
    low_rate_of,
    ratio_of,
    sweep_of,
)
from bench.suites.ceiling.wrk import (
    WrkPhase,
    run_wrk,
    write_bodies,
    wrk_binary,
    wrk_command,
    wrk_version,
)


@dataclass(frozen=True)
class Endpoint:
    """A server under test: its name, URL, API key and process id (for its CPU time)."""

    name: str
    url: str
    key: str | None = None
    pid: int | None = None


#: The warm-up of each low-rate pair, uncounted (``bench.harness.runner``'s warm-up).
LOW_RATE_WARMUP = 5


def fresh_questions(questions: Sequence[str], run: int, count: int) -> list[str]:
    """``count`` questions that no earlier request asked: the bench's questions in turn, each
    with the run's number and its own."""
    if not questions:
        raise ValueError("no questions")
    return [f"{questions[i % len(questions)]} (variant {run}.{i + 1})" for i in range(count)]


def leaves(phases: Sequence[WrkPhase], *, factor: float, patience: int) -> bool:
    """Whether a target is done: its last ``patience`` rates, above its lowest, all failed the
    rule (whole-response p99 under ``factor`` times its value at the lowest rate, errors at
    most 1%)."""
    ordered = sorted(phases, key=lambda p: p.rate)
    if len(ordered) <= patience or ordered[0].latency_ms.p99 is None:
        return False
    limit = ordered[0].latency_ms.p99 * factor
    return all(not point_holds(p.latency_ms.p99, p.error_ratio, limit) for p in ordered[-patience:])


def cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds (user and system) that ``pid`` and its descendants have used, from Linux's
    ``/proc``; ``None`` where it cannot be read."""
    if pid is None:
        return None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total, todo = 0, [pid]
    try:
        while todo:
            current = todo.pop()
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    except (OSError, ValueError, IndexError):
        return None
    return total / tick


def phase_on(endpoint: Endpoint, **kwargs: Any) -> WrkPhase:
    """One wrk phase against ``endpoint``, with the CPU its server used per response."""
    before = cpu_seconds(endpoint.pid)
    got = run_wrk(endpoint.name, endpoint.url, key=endpoint.key, **kwargs)
    after = cpu_seconds(endpoint.pid)
    if before is None or after is None or not got.answered:
        return got
    per_response = round((after - before) * 1000 / got.answered, 3)
    return got.model_copy(update={"server_cpu_ms": per_response})


def _answered(phase: WrkPhase) -> str:
    return (
        f"{phase.target} p99 {phase.latency_ms.p99} ms, {phase.answered_rps:g} req/s answered, "
        f"errors {phase.error_ratio:.1%}, late {phase.late}"
    )


def sweep(
    endpoints: Sequence[Endpoint],
    rates: Sequence[float],
    *,
    bodies: Path | Callable[[int, float, float], Path],
    seconds: float,
    min_requests: int,
    factor: float,
    patience: int,
    pause_s: float,
    seed: int,
    say: Callable[[str], None],
    described: Callable[[WrkPhase], str] = _answered,
) -> list[WrkPhase]:
    """wrk at each rate (ascending) against each endpoint in turn, until each leaves
    (``leaves``); every phase. ``bodies``: the request bodies every phase sends, or, called with
    a step, its rate and its seconds, those of that step (the same for every endpoint);
    ``described``: how a phase is said."""
    phases: list[WrkPhase] = []
    active = list(endpoints)
    for step, rate in enumerate(sorted(rates)):
        if not active:
            break
        secs = max(seconds, math.ceil(min_requests / rate))
        sent = bodies if isinstance(bodies, Path) else bodies(step, rate, secs)
        got = []
        for endpoint in active if step % 2 == 0 else reversed(active):
            got.append(phase_on(endpoint, bodies=sent, rate=rate, seconds=secs,
                                seed=seed * 1000 + step))  # fmt: skip
            time.sleep(pause_s)
        phases += got
        say(f"  {rate:g} req/s: " + "; ".join(described(p) for p in got))
        active = [
            e
            for e in active
            if not leaves([p for p in phases if p.target == e.name], factor=factor,
                          patience=patience)
        ]  # fmt: skip
    return phases


def low_rate_pairs(
    endpoints: Sequence[Endpoint],
    questions: Sequence[str],
    *,
    run: int,
    rate: float,
    requests: int,
) -> list[LowRate]:
    """Both targets at ``rate`` by the bench's own client, rounds alternating: questions never
    asked before, then one question asked again and again."""
    from bench.harness.client import Target
    from bench.harness.runner import LoadSpec, measure

    targets = [Target(e.name, e.url, e.key) for e in endpoints]
    spec = LoadSpec(rate=rate, requests=requests, warmup=LOW_RATE_WARMUP, rounds=4, seed=run)
    # The warm-up asks from index 10_000 on (bench.harness.runner): past the measured ones.
    fresh = fresh_questions(questions, run, 10_000 + LOW_RATE_WARMUP + requests)
    kinds: tuple[tuple[Literal["fresh", "repeats"], list[str]], ...] = (
        ("fresh", fresh),
        ("repeats", [questions[0]]),
    )
    pairs = []
    for kind, asked in kinds:
        floor, ragtime = asyncio.run(measure(targets, asked, spec, show_progress=False))
        pairs.append(low_rate_of(kind, rate, floor, ragtime))
    return pairs


def workers_of(config: dict[str, str]) -> tuple[Workers, int]:
    """How many processes ``ragtime serve`` starts from ``config`` here, and its max output
    tokens (what the floor streams)."""
    from app.settings import AUTO_WORKERS_MAX, Settings, usable_cores

    values = {
        k.removeprefix("RAGTIME_").lower(): v for k, v in config.items() if k.startswith("RAGTIME_")
    }
    settings = Settings(**values)  # type: ignore[arg-type]
    workers = Workers(
        setting=config.get("RAGTIME_WORKERS", os.environ.get("RAGTIME_WORKERS", "auto")),
        resolved=settings.serve_workers,
        cores=usable_cores(),
        auto_max=AUTO_WORKERS_MAX,
    )
    return workers, settings.max_output_tokens


def _relative(argv: Sequence[str]) -> list[str]:
    """``argv`` with the checkout's paths made relative to it (as the commands are shown)."""
    from bench.harness.paths import REPO

    return [a.removeprefix(f"{REPO}/") for a in argv]


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def run_ceiling_bench(
    *,
    config_path: Path,
    questions: Sequence[str],
    rates: Sequence[float],
    runs: int,
    seconds: float,
    min_requests: int,
    low_rate: float,
    low_requests: int,
    patience: int,
    pause_s: float,
    floor_tokens: int | None,
    log_dir: Path,
    work_dir: Path,
    profile_dir: Path | None,
    command: str,
    secret_keys: Sequence[str],
    say: Callable[[str], None],
    factor: float = 2.0,
) -> CeilingBench:
    """Start both servers, do ``runs`` runs, and gather them (see the module's docstring)."""
    from bench.harness.record import machine_info, now_iso, versions
    from bench.harness.serve import config_key, floor_server, ragtime_server, read_config

    binary = wrk_binary()
    machine, created = machine_info(), now_iso()
    config = read_config(config_path)
    workers, max_tokens = workers_of(config)
    tokens = floor_tokens or max_tokens
    bodies = write_bodies(questions, work_dir / "ceiling-bodies.txt")
    done: list[CeilingRun] = []
    with ExitStack() as stack:
        say(f"starting the floor ({tokens} tokens) and ragtime from {config_path} ...")
        floor = stack.enter_context(floor_server(tokens, log_dir=log_dir))
        server = stack.enter_context(
            ragtime_server("ragtime", config, log_dir=log_dir, profile_dir=profile_dir)
        )
        endpoints = [
            Endpoint("floor", floor.url, None, floor.pid),
            Endpoint("ragtime", server.url, config_key(config), server.pid),
        ]
        for number in range(1, runs + 1):
            start = _loadavg()
            say(f"run {number} of {runs}: {low_rate:g} req/s, fresh questions and repeats ...")
            pairs = low_rate_pairs(
                endpoints, questions, run=number, rate=low_rate, requests=low_requests
            )
            say(f"run {number} of {runs}: the sweep")
            phases = sweep(
                endpoints, rates, bodies=bodies, seconds=seconds, min_requests=min_requests,
                factor=factor, patience=patience, pause_s=pause_s, seed=number, say=say,
            )  # fmt: skip
            f_sweep = sweep_of("floor", phases, factor=factor)
            r_sweep = sweep_of("ragtime", phases, factor=factor)
            done.append(
                CeilingRun(
                    number=number,
                    floor=f_sweep,
                    ragtime=r_sweep,
                    ratio=ratio_of(f_sweep.ceiling, r_sweep.ceiling),
                    low_rate=pairs,
                    loadavg=[start, _loadavg()],
                )
            )
    machine["loadavg_at_end"] = _loadavg()
    example = wrk_command(
        "http://127.0.0.1:PORT", bodies=Path("BODIES"), rate=100.0, seconds=seconds,
        connections=25, key="KEY", seed=1,
    )  # fmt: skip
    return CeilingBench(
        created=created,
        command=command,
        machine=machine,
        versions=versions(),
        generator=wrk_version(binary),
        generator_command=shlex.join(_relative(example)),
        config_path=str(config_path),
        config={k: v for k, v in config.items() if k not in secret_keys},
        workers=workers,
        floor_tokens=tokens,
        rates=sorted(rates),
        seconds=seconds,
        min_requests=min_requests,
        low_rate=low_rate,
        low_requests=low_requests,
        runs=done,
        **aggregate(done),
    )
