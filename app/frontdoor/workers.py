"""``ragtime serve --workers N``: the supervisor of the server processes behind one port.

Each worker is a process of its own (``multiprocessing``'s spawn), serving with
``app.frontdoor.server.GracefulServer`` on a socket of its own (``SO_REUSEPORT``,
``app.frontdoor.listeners``) or on the supervisor's one socket. The supervisor holds the
address, starts the workers, starts another when one dies while serving, and passes the stop
on, keeping its meaning (``app.frontdoor.server``'s signals):

- the first SIGINT or SIGTERM reaches each worker as one SIGTERM: drain. A terminal's Ctrl-C
  reaches the workers too (the process group), and a SIGTERM after it is the same drain;
- a second SIGINT, or a SIGQUIT, reaches each worker as a SIGQUIT: stop now.

A worker that fails to start (exit status 3, as uvicorn's) stops the others: the server exits
with that status instead of starting it again and again. The supervisor exits once every worker
has.

This is ours, not uvicorn's supervisor: that one makes its workers with its module's
``Process`` class, so serving them with our server meant replacing that class for the whole
process, and it passes every stop on as the same SIGTERM, so "stop now" never reached a worker.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import socket
from collections.abc import Callable
from multiprocessing.connection import wait as wait_for
from multiprocessing.context import SpawnProcess
from types import FrameType

import uvicorn

from app.frontdoor import listeners
from app.frontdoor.server import STARTUP_FAILURE, serving_server
from tracing.metrics import process_gone

log = logging.getLogger("ragtime")

#: How often the supervisor looks at its workers when none exits meanwhile.
WATCH_S = 0.5


def serve_worker(config: uvicorn.Config, sockets: list[socket.socket]) -> None:  # pragma: no cover
    """One worker process: its logging as configured, its own socket unless given the
    supervisor's, and a ``GracefulServer`` serving on it."""
    config.configure_logging()
    server = serving_server(config)
    server.run(sockets or [listeners.worker_socket(config)])
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)


class Supervisor:
    """``config.workers`` processes serving ``sockets`` (none: each binds its own)."""

    def __init__(
        self,
        config: uvicorn.Config,
        sockets: list[socket.socket],
        target: Callable[[uvicorn.Config, list[socket.socket]], None] = serve_worker,
    ) -> None:
        self.config = config
        self.sockets = sockets
        self.target = target
        self.workers: list[SpawnProcess] = []
        self.stops_asked = 0
        self.exit_status = 0

    def supervise(self) -> int:
        """Serve until every worker has exited; the server's exit status."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in self.forwarded()}
        try:
            for _ in range(self.config.workers):
                self.workers.append(self._start())
            while self.workers:  # woken as soon as a worker exits
                wait_for([worker.sentinel for worker in self.workers], timeout=WATCH_S)
                self._look_after_workers()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return self.exit_status

    @staticmethod
    def forwarded() -> tuple[signal.Signals, ...]:
        return (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT)

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        self._pass_on(sig)  # at once: Python runs the handler on this thread, between steps

    def _start(self) -> SpawnProcess:
        process = multiprocessing.get_context("spawn").Process(
            target=self.target, args=(self.config, self.sockets), name="ragtime-worker"
        )
        process.start()
        log.info("started server process [%s]", process.pid)
        return process

    def _pass_on(self, sig: int) -> None:
        """A stop signal to every worker, as the module's docstring says."""
        self.stops_asked += 1
        stop_now = sig == signal.SIGQUIT or (sig == signal.SIGINT and self.stops_asked > 1)
        to_workers = signal.SIGQUIT if stop_now else signal.SIGTERM
        if self.stops_asked == 1 or stop_now:
            log.info("stopping %d server processes (%s)", len(self.workers), to_workers.name)
            self._signal_all(to_workers)

    def _signal_all(self, sig: signal.Signals) -> None:
        for worker in list(self.workers):
            if worker.pid is not None and worker.exitcode is None:
                with contextlib.suppress(ProcessLookupError):  # exited meanwhile: collected below
                    os.kill(worker.pid, sig)

    def _look_after_workers(self) -> None:
        """Collect the workers that exited; start another for one that died while serving, or
        stop them all when one could not start."""
        for worker in [w for w in self.workers if w.exitcode is not None]:
            worker.join()
            self.workers.remove(worker)
            process_gone(worker.pid)  # its live gauges leave /metrics with it
            if worker.exitcode == STARTUP_FAILURE and not self.stops_asked:
                log.error("server process [%s] could not start: stopping", worker.pid)
                self.exit_status = STARTUP_FAILURE
                self.stops_asked = 1
                self._signal_all(signal.SIGTERM)
            elif not self.stops_asked:
                log.warning(
                    "server process [%s] died (exit status %s): starting another",
                    worker.pid,
                    worker.exitcode,
                )
                self.workers.append(self._start())
