"""Shutdown as real supervisors signal it (issue 41 §1), on real processes with real signals.

- A SIGTERM to the whole process group of ``make serve`` reaches ``ragtime serve`` twice (from
  the group, and from make, which passes it on), microseconds apart; two SIGTERMs 0.2 s apart to
  the server alone are the same request. Either way the grace stands: streams run on and end
  with their ``shutting_down`` event, a request that arrives meanwhile gets a 503 (not a refused
  connection), a request not yet answered at the grace's end gets the 503 (not a 500).
- A second SIGINT, or a SIGQUIT, stops now: the grace ends at once, and ends as a grace does.
- The image's command line (``Dockerfile`` ``CMD``) leaves ``ragtime serve`` as the process that
  a container's stop signals (the shell ``exec``s it), and it drains.

Generation is the null backend slowed to 50 ms a token (``RAGTIME_FAULT_GENERATE_TOKEN_DELAY_MS``):
an answer of 192 tokens takes about 10 s, longer than any grace here.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from app.frontdoor.shutdown import CUT_STREAMS_AFTER_S, EXIT_AFTER_GRACE_S
from tests.helpers.ports import free_port
from tests.helpers.processes import cli_env, wait_ready
from tests.helpers.stopping import (
    Outcome,
    ask_body,
    chat_body,
    joined,
    shutting_down,
    started,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
#: Longer than uvicorn's own 1 s cut, which a second SIGTERM used to start.
GRACE_S = 6.0
#: Signals, process exit and the test's own polling take a little more than the promise: on
#: 2 cores shared with a whole `make test` beside it, the exit came 2.1 s past the promise; with
#: an evaluation's ingest and another test run beside it too, 3.5 s past. Less than a grace: a
#: server that waited one more grace (6 s) would still be caught.
SLACK_S = 5.0
SLOW_NULL = {
    "RAGTIME_GENERATION_BACKEND": "null",
    "RAGTIME_FAULT_GENERATE_TOKEN_DELAY_MS": "50",
}


def headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def in_flight(url: str, key: str) -> tuple[list[Outcome], Outcome]:
    """Three answers streaming (two asks, one chat completion) and one chat completion asked
    whole (its response begins only when it is done), once the streams have begun."""
    streams = [started(url, "/v1/ask", ask_body(), headers(key)) for _ in range(2)]
    streams.append(started(url, "/v1/chat/completions", chat_body("null"), headers(key)))
    whole = started(url, "/v1/chat/completions", chat_body("null", stream=False), headers(key))
    for outcome in streams:
        assert outcome.first_byte.wait(60), "a stream did not begin"
    time.sleep(0.3)  # tokens flowing
    ended = [o for o in [*streams, whole] if o.thread is None or not o.thread.is_alive()]
    assert not ended, f"ended before the stop (the test's premise): {ended}"
    return streams, whole


def late_request_is_refused(url: str, key: str) -> None:
    """A question sent during the grace: answered 503 ``shutting_down`` at once."""
    late = httpx.post(url + "/v1/ask", json={"question": "And a tuple?"}, headers=headers(key))
    assert late.status_code == 503, late.text
    assert late.json()["error"]["type"] == "shutting_down"
    assert int(late.headers["retry-after"]) >= 1


def ended_by_the_stop(streams: list[Outcome], whole: Outcome) -> None:
    """Each stream ended with its ``shutting_down`` event; the answer asked whole, not yet
    begun at the grace's end, got the 503; nothing else (no cut without an event, no 500)."""
    for outcome in streams:
        assert not outcome.failed, outcome.failed
        assert outcome.status == 200 and shutting_down(outcome), outcome.events[-2:]
    assert not whole.failed, whole.failed
    assert whole.status == 503 and shutting_down(whole), (whole.status, whole.body)


class ExitClock:
    """When ``proc`` exited, noted by a thread of its own from the moment the stop is sent:
    the test's own checks meanwhile (its requests, joining its streams on a busy machine) do
    not count in the figure."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.since = time.monotonic()
        self.exited_at: float | None = None
        self._watch = threading.Thread(target=self._wait, daemon=True)
        self._watch.start()

    def _wait(self) -> None:
        self.proc.wait()
        self.exited_at = time.monotonic()

    def within(self, limit_s: float) -> None:
        self._watch.join(timeout=limit_s + 60)
        assert self.exited_at is not None, f"still running {limit_s + 60:.0f} s after the stop"
        took = self.exited_at - self.since
        assert took <= limit_s, f"exited {took:.1f} s after the stop; promised {limit_s:.1f} s"


def drains(url: str, key: str, proc: subprocess.Popen[bytes], stop: Callable[[], None]) -> None:
    """``stop()`` (the signals of the case at hand) with answers in flight: the server drains
    as one SIGTERM asks, and the process exits on time."""
    streams, whole = in_flight(url, key)
    stop()
    clock = ExitClock(proc)
    time.sleep(1.5)  # past the 1 s in which uvicorn's own shutdown cut everything
    late_request_is_refused(url, key)
    assert httpx.get(url + "/healthz").status_code == 200  # alive: no restart
    joined([*streams, whole])
    clock.within(GRACE_S + EXIT_AFTER_GRACE_S + SLACK_S)
    ended_by_the_stop(streams, whole)


# -- the server process alone ---------------------------------------------------------------


@pytest.fixture
def data_dir(seeded_data_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "data"
    shutil.copytree(seeded_data_dir, copy)
    return copy


def serve_hashed(data_dir: Path, grace_s: float) -> tuple[str, subprocess.Popen[bytes]]:
    """``ragtime serve`` (the hash embedder, one process) over ``data_dir``."""
    port = free_port()
    env = cli_env(data_dir, shutdown_grace_s=str(grace_s)) | SLOW_NULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.hash_cli", "serve", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc)
    return url, proc


@pytest.fixture
def stopped_at_end() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes the test started, killed if still running when it ends."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("gap_s", [0.0, 0.2], ids=["at-once", "0.2s-apart"])
def test_a_repeated_sigterm_is_the_same_drain(
    data_dir: Path, api_key: str, gap_s: float, stopped_at_end: list[subprocess.Popen[bytes]]
) -> None:
    url, proc = serve_hashed(data_dir, GRACE_S)
    stopped_at_end.append(proc)

    def twice() -> None:
        proc.send_signal(signal.SIGTERM)
        time.sleep(gap_s)
        proc.send_signal(signal.SIGTERM)

    drains(url, api_key, proc, twice)


@pytest.mark.parametrize(
    "first, then",
    [(signal.SIGTERM, signal.SIGQUIT), (signal.SIGINT, signal.SIGINT), (signal.SIGQUIT, None)],
    ids=["term-then-quit", "int-twice", "quit"],
)
def test_stop_now_ends_everything_as_the_grace_would(
    data_dir: Path,
    api_key: str,
    first: signal.Signals,
    then: signal.Signals | None,
    stopped_at_end: list[subprocess.Popen[bytes]],
) -> None:
    long_grace_s = 120.0
    url, proc = serve_hashed(data_dir, long_grace_s)
    stopped_at_end.append(proc)
    streams, whole = in_flight(url, api_key)
    proc.send_signal(first)
    if then is not None:
        time.sleep(0.5)
        late_request_is_refused(url, api_key)  # the first one drains
        proc.send_signal(then)
    clock = ExitClock(proc)
    joined([*streams, whole])
    # Gone as at a grace's end: long before the two minutes of this one.
    clock.within(CUT_STREAMS_AFTER_S + EXIT_AFTER_GRACE_S + SLACK_S)
    ended_by_the_stop(streams, whole)


# -- make serve, and the image's command, with the real models --------------------------------


@pytest.fixture
def demo_dir(minilm_data_dir: Path, tmp_path: Path) -> Path:
    """A copy of the MiniLM data dir: ``setup-demo`` finds its ``demo`` collection, and only
    writes the demo key."""
    copy = tmp_path / "data"
    shutil.copytree(minilm_data_dir, copy)
    return copy


def real_env(data_dir: Path, **settings: str) -> dict[str, str]:
    """This test's environment less ragtime's settings and make's own, and the settings of a
    slow null backend over ``data_dir``, plus ``settings`` (``RAGTIME_*`` names)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGTIME_", "MAKE"))}
    ours = {"RAGTIME_DATA_DIR": str(data_dir), "RAGTIME_SHUTDOWN_GRACE_S": str(GRACE_S)}
    return env | SLOW_NULL | ours | settings


def demo_key(data_dir: Path) -> str:
    return (data_dir / "demo-api-key").read_text().strip()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_make_serve_drains_on_a_process_group_sigterm(
    demo_dir: Path, workers: str, stopped_at_end: list[subprocess.Popen[bytes]]
) -> None:
    """As ``kill -TERM -- -PGID`` (systemd's ``KillMode=control-group``, a terminal's job
    control) stops ``make serve``: make and every ragtime process get a SIGTERM, and make
    passes its own on. With two workers, our supervisor sends each worker one more."""
    venv = Path(sys.prefix)
    port = free_port()
    make = [
        "make", "--no-print-directory", "-C", str(ROOT), "serve",
        f"VENV={venv}", f"PORT={port}",
        "-o", str(venv / ".installed"),  # installed already: this test's own interpreter
    ]  # fmt: skip
    proc = subprocess.Popen(
        make,
        env=real_env(demo_dir, RAGTIME_WORKERS=workers),
        start_new_session=True,  # make leads a process group of its own, as under a supervisor
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stopped_at_end.append(proc)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, proc, timeout_s=240)
        drains(url, demo_key(demo_dir), proc, lambda: os.killpg(proc.pid, signal.SIGTERM))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def image_command() -> tuple[list[str], dict[str, str]]:
    """The ``Dockerfile``'s ``CMD`` (exec form) and the environment its ``ENV`` lines set."""
    command: list[str] = []
    env: dict[str, str] = {}
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("CMD "):
            command = json.loads(line[4:])
        elif line.startswith("ENV "):
            env |= dict(pair.split("=", 1) for pair in line[4:].split())
    assert command, "the Dockerfile has no CMD in exec form"
    return command, env


def test_the_image_command_leaves_the_server_to_get_the_signal(
    demo_dir: Path, stopped_at_end: list[subprocess.Popen[bytes]]
) -> None:
    """``docker stop`` signals the container's first process: the command's shell must have
    become ``ragtime serve`` (``exec``), or the SIGTERM never reaches the server."""
    command, image_env = image_command()
    port = free_port()
    env = real_env(demo_dir) | image_env | {"RAGTIME_HOST": "127.0.0.1", "RAGTIME_PORT": str(port)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # ragtime
    env.pop("PORT", None)
    proc = subprocess.Popen(
        command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    stopped_at_end.append(proc)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc, timeout_s=240)
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
    assert b"serve" in cmdline and not cmdline[0].endswith(b"sh"), cmdline
    # What `docker stop` sends to the container's process 1.
    drains(url, demo_key(demo_dir), proc, lambda: proc.send_signal(signal.SIGTERM))
