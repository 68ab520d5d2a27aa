"""Stand-in worker processes for ``app.frontdoor.workers.Supervisor`` tests: each writes the stop
signals it gets to a file of its own under ``$RAGTIME_TEST_WORKER_DIR`` (importable by a spawned
process, as a worker target must be)."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from types import FrameType

import uvicorn

DIR_ENV = "RAGTIME_TEST_WORKER_DIR"


def _record(name: str) -> None:
    with (Path(os.environ[DIR_ENV]) / str(os.getpid())).open("a") as out:
        out.write(name + "\n")


def recording(config: uvicorn.Config, sockets: list[socket.socket]) -> None:
    """Serve nothing: note each SIGTERM, and exit on a SIGQUIT."""

    def on(sig: int, frame: FrameType | None) -> None:
        _record(signal.Signals(sig).name)
        if sig == signal.SIGQUIT:
            os._exit(0)

    signal.signal(signal.SIGTERM, on)
    signal.signal(signal.SIGQUIT, on)
    _record("started")
    while True:
        time.sleep(0.02)


def failing_to_start(config: uvicorn.Config, sockets: list[socket.socket]) -> None:
    """The first worker to come fails to start (exit status 3), once another has started (so
    that the stop reaches one that records it); the others record as above."""
    folder = Path(os.environ[DIR_ENV])
    try:
        (folder / "failed").touch(exist_ok=False)
    except FileExistsError:
        recording(config, sockets)
    deadline = time.monotonic() + 30
    while not any(p.name.isdigit() for p in folder.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.02)
    raise SystemExit(3)


def dying_once(config: uvicorn.Config, sockets: list[socket.socket]) -> None:
    """The first worker to come dies once started (exit status 1); the rest record as above."""
    marker = Path(os.environ[DIR_ENV]) / "died"
    try:
        marker.touch(exist_ok=False)
    except FileExistsError:
        recording(config, sockets)
    _record("started")
    raise SystemExit(1)
