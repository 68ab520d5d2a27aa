"""The server that signals reach (issue 24 §1, issue 41 §1): uvicorn's ``Server``, stopping as
``app.frontdoor.shutdown.Shutdown`` says, with a watchdog that ends the process on time;
``serving_server``, the one each ``ragtime serve`` process runs (``app.frontdoor.run``).

Signals, as supervisors send them (issue 41 §1):

- SIGTERM, however often: the same request to drain. A supervisor that signals the whole process
  group while a wrapper forwards the signal too (GNU make, a shell, systemd's
  ``KillMode=control-group``) delivers two within microseconds; neither shortens the grace.
- A second SIGINT (the first one drains, as SIGTERM does), or a SIGQUIT at any time: stop now.
  The grace ends at once (``Shutdown.end_grace_now``), and it ends as any grace does: each open
  stream sends its ``shutting_down`` event, a request not yet answered gets the 503, and the
  process exits within ``EXIT_AFTER_GRACE_S``. Nothing is cut without its event, and nothing is
  a 500. A signal before the app has started stops the start-up, as uvicorn does.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn

from app.frontdoor.heap import freeze_startup_heap
from app.frontdoor.shutdown import EXIT_AFTER_GRACE_S, Shutdown
from app.settings import get_settings

if TYPE_CHECKING:  # the read-ahead plug-in is imported only when it is on
    from app.frontdoor.read_ahead.reader import ReadAhead

log = logging.getLogger("ragtime")

#: The exit status of a server that failed to start, as uvicorn's own (``uvicorn.config``).
STARTUP_FAILURE = 3


class GracefulServer(uvicorn.Server):
    """uvicorn's server, stopping as ``Shutdown`` says: a signal begins the app's shutdown
    (found in the lifespan's state, ``STATE_KEY``) instead of closing the socket; the server
    closes it once that shutdown is done. ``hard_exit``: a watchdog ends the process
    ``EXIT_AFTER_GRACE_S`` after the grace; ``freeze_heap``: once started, the process's heap is
    frozen out of the collector's full passes (``app.frontdoor.heap``). Both for ``ragtime serve``,
    never in a test's thread. ``read_ahead`` (the opt-in plug-in; plain TCP, one socket): the
    socket is served by a thread that reads requests and decides their admission ahead of the
    event loop (``app.frontdoor.read_ahead``)."""

    STATE_KEY = "ragtime.shutdown"

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        hard_exit: bool = False,
        freeze_heap: bool = False,
        read_ahead: bool = False,
    ) -> None:
        super().__init__(config)
        self.hard_exit = hard_exit
        self.freeze_heap = freeze_heap
        self.read_ahead = read_ahead
        self.reader: ReadAhead | None = None
        self._stop_asked = False
        self._stop_signal: int | None = None
        """The SIGINT or SIGTERM that began the stop, raised again once served."""
        #: Set once the server listens and serves. uvicorn's ``started`` comes earlier, inside
        #: its ``startup``: before the socket listens and the read-ahead thread runs.
        self.serving = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        config = self.config
        one_tcp_socket = not (config.is_ssl or config.uds or config.fd is not None) and (
            sockets is None or len(sockets) == 1
        )
        if not (self.read_ahead and one_tcp_socket):
            await super().startup(sockets)
        else:
            # Bound before the app starts, as uvicorn would; uvicorn itself then listens on none,
            # and the socket listens once the app has started (``app.frontdoor.listeners``).
            listener = sockets[0] if sockets else config.bind_socket()
            try:
                await super().startup([])
                listener.listen(config.backlog)
                from app.frontdoor.read_ahead.serving import listen

                self.reader = await listen(self, listener)
            except BaseException:
                listener.close()
                raise
        if self.freeze_heap:
            freeze_startup_heap()
        if self.started:
            self.serving.set()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.reader is not None:
            self.reader.stop()  # no new connection, and none held there any more
        await super().shutdown(sockets)

    @property
    def app_shutdown(self) -> Shutdown | None:
        lifespan = getattr(self, "lifespan", None)
        found = getattr(lifespan, "state", {}).get(self.STATE_KEY)
        return found if isinstance(found, Shutdown) else None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's SIGINT and SIGTERM handlers, and SIGQUIT's too (stop now), while serving;
        then, as uvicorn does with the signals it handled, the one that began the stop raised
        again under the handlers restored."""
        main = threading.current_thread() is threading.main_thread()
        with super().capture_signals():
            previous = signal.signal(signal.SIGQUIT, self.handle_exit) if main else None
            try:
                yield  # (signals reach the main thread only, as uvicorn says)
            finally:
                if previous is not None:
                    signal.signal(signal.SIGQUIT, previous)
        if main and self._stop_signal is not None:
            signal.raise_signal(self._stop_signal)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """A signal, as the module's docstring says: SIGTERM drains (again: nothing more); a
        second SIGINT or a SIGQUIT ends the grace now. Before the app has started, uvicorn's."""
        shutdown = self.app_shutdown
        if shutdown is None or not self.started:
            super().handle_exit(sig, frame)
            return
        first = not self._stop_asked
        stop_now = sig == signal.SIGQUIT or (sig == signal.SIGINT and not first)
        if first:
            self._stop_asked = True
            if sig != signal.SIGQUIT:  # raised again once served, as uvicorn does; not a core
                self._stop_signal = sig
            shutdown.begin()
            log.info(
                "stopping: new requests get 503 shutting_down; %d in flight get %.1f s",
                shutdown.in_flight,
                shutdown.grace_s,
            )
            if self.hard_exit:
                threading.Thread(
                    target=_exit_after_grace, args=(shutdown,), name="ragtime-exit", daemon=True
                ).start()
        name = signal.Signals(sig).name
        if stop_now and shutdown.grace_ends_at > time.monotonic():
            log.warning(
                "stopping now (%s): %d in flight end as at the grace's end",
                name,
                shutdown.in_flight,
            )
            shutdown.end_grace_now()
        elif not first:
            log.info("stopping already: %s changes nothing", name)

    async def on_tick(self, counter: int) -> bool:
        if await super().on_tick(counter):
            return True
        shutdown = self.app_shutdown
        return self._stop_asked and (shutdown is None or shutdown.done())


def _exit_after_grace(shutdown: Shutdown) -> None:
    """End the process ``EXIT_AFTER_GRACE_S`` after the grace if it has not ended by then; the
    grace's end may move closer meanwhile (``Shutdown.end_grace_now``)."""
    # The end is moved before the event is set: cleared after the wait, a move is never missed.
    while (left_s := shutdown.grace_ends_at + EXIT_AFTER_GRACE_S - time.monotonic()) > 0:
        shutdown.grace_moved.wait(left_s)
        shutdown.grace_moved.clear()
    threads = sorted(t.name for t in threading.enumerate() if t is not threading.current_thread())
    log.error(
        "still running %.1f s after the shutdown grace (%d requests in flight; threads: %s): "
        "exiting now",
        EXIT_AFTER_GRACE_S,
        shutdown.in_flight,
        ", ".join(threads[:8]),
    )
    for handler in logging.getLogger().handlers + log.handlers:
        handler.flush()
    os._exit(1)


def serving_server(config: uvicorn.Config) -> GracefulServer:
    """The server of one ``ragtime serve`` process: its watchdog armed, its heap frozen once
    started as this process's settings (from the environment) say."""
    settings = get_settings()
    return GracefulServer(
        config,
        hard_exit=True,
        freeze_heap=settings.gc_freeze,
        read_ahead=settings.serve_read_ahead,
    )
