"""Our supervisor of ``ragtime serve --workers N`` (``app.frontdoor.workers``): it passes a stop on
with its meaning (the first SIGINT or SIGTERM as a SIGTERM, a second SIGINT or a SIGQUIT as a
SIGQUIT: stop now), stops when a worker cannot start, and starts another for one that died.
Real processes and real signals; the workers are stand-ins that record what reaches them."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import uvicorn

from app.frontdoor.workers import Supervisor
from tests.helpers import signal_workers
from tests.helpers.signal_workers import DIR_ENV

pytestmark = pytest.mark.process


@pytest.fixture
def worker_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(DIR_ENV, str(tmp_path))
    yield tmp_path


def received(worker_dir: Path) -> list[list[str]]:
    """What each worker recorded, worker by worker."""
    return sorted(path.read_text().split() for path in worker_dir.iterdir() if path.name.isdigit())


def all_started(worker_dir: Path, count: int) -> bool:
    """``count`` workers have recorded their start. A worker's file exists as soon as it opens
    it, before its "started" is written: a signal sent on the file alone could be recorded
    first (a loaded machine's make test once saw ``SIGTERM, started``)."""
    workers = received(worker_dir)
    return len(workers) == count and all(w[:1] == ["started"] for w in workers)


def when(
    condition: Callable[[], bool], then: Callable[[], None], supervisor: Supervisor
) -> threading.Thread:
    """Once ``condition`` holds, ``then()``, from a thread of its own. If it does not hold
    within 30 s, the supervisor's workers are killed instead (a signal sent once the supervisor
    is done would end the test's own process): the test then fails on what it finds."""

    def wait() -> None:
        deadline = time.monotonic() + 30
        while not condition():
            if time.monotonic() > deadline:
                for worker in list(supervisor.workers):
                    worker.kill()
                return
            time.sleep(0.02)
        then()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def supervising(target: Callable[..., None], workers: int = 2) -> Supervisor:
    config = uvicorn.Config("app.main:create_app", factory=True, workers=workers)
    return Supervisor(config, sockets=[], target=target)


@pytest.mark.parametrize(
    "signals",
    [[signal.SIGINT, signal.SIGINT], [signal.SIGTERM, signal.SIGQUIT], [signal.SIGQUIT]],
    ids=["int-twice", "term-then-quit", "quit"],
)
def test_a_stop_reaches_every_worker_with_its_meaning(
    worker_dir: Path, signals: list[signal.Signals]
) -> None:
    """To the supervisor alone (not the process group): each worker drains on the first, and
    stops now on what means "stop now"."""
    supervisor = supervising(signal_workers.recording)

    def send() -> None:
        for sig in signals:
            os.kill(os.getpid(), sig)  # the supervisor runs in this process's main thread
            time.sleep(0.3)

    sender = when(lambda: all_started(worker_dir, 2), send, supervisor)
    assert supervisor.supervise() == 0
    sender.join()
    expected = ["started", *(["SIGTERM"] if signals[0] != signal.SIGQUIT else []), "SIGQUIT"]
    assert received(worker_dir) == [expected, expected]


def test_a_repeated_sigterm_reaches_the_workers_once(worker_dir: Path) -> None:
    supervisor = supervising(signal_workers.recording)

    def send() -> None:
        for sig in (signal.SIGTERM, signal.SIGTERM, signal.SIGQUIT):
            os.kill(os.getpid(), sig)
            time.sleep(0.3)

    sender = when(lambda: all_started(worker_dir, 2), send, supervisor)
    assert supervisor.supervise() == 0
    sender.join()
    assert received(worker_dir) == [["started", "SIGTERM", "SIGQUIT"]] * 2


def test_a_worker_that_cannot_start_stops_the_server(worker_dir: Path) -> None:
    """Not started again and again: the others are stopped, and the server exits 3."""
    supervisor = supervising(signal_workers.failing_to_start)
    stopper = when(
        # Once the worker has its SIGTERM: asking to stop is not yet the signal's arrival.
        lambda: received(worker_dir) == [["started", "SIGTERM"]],
        lambda: os.kill(os.getpid(), signal.SIGQUIT),  # the stand-in drains forever on SIGTERM
        supervisor,
    )
    assert supervisor.supervise() == 3
    stopper.join()
    assert received(worker_dir) == [["started", "SIGTERM", "SIGQUIT"]]


def test_a_worker_that_dies_while_serving_is_replaced(worker_dir: Path) -> None:
    supervisor = supervising(signal_workers.dying_once)
    stopper = when(
        lambda: all_started(worker_dir, 3),  # the one that died, its sibling, its successor
        lambda: os.kill(os.getpid(), signal.SIGQUIT),
        supervisor,
    )
    assert supervisor.supervise() == 0
    stopper.join()
    assert sorted(received(worker_dir)) == [
        ["started"],
        ["started", "SIGQUIT"],
        ["started", "SIGQUIT"],
    ]
