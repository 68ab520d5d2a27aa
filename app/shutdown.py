"""How the server stops (issue 24 §1): a grace for the work in flight, a 503 for what arrives
during it, and an exit on time, whatever is still running.

On SIGTERM or SIGINT (``GracefulServer.handle_exit``) the ``Shutdown`` begins:

- the socket stays open, and every new request is answered at once with 503 ``shutting_down``
  and ``Retry-After`` (``ShutdownMiddleware``; the probes and ``/metrics`` are answered as
  usual, and ``/readyz`` says not ready), so a load balancer that has not yet taken the pod out
  gets an answer it can retry elsewhere, not a refused connection;
- a live answer stream runs on for ``RAGTIME_SHUTDOWN_GRACE_S`` and then ends with an ``error``
  event ``shutting_down`` (``app.answers.Drain``), its generation cancelled;
- a request still in flight at the end of the grace that has not begun its response (a
  question waiting for its first token, an upload being ingested) is cancelled and answered
  with the same 503; whatever is left half a second later is cancelled as it stands;
- the server then closes its socket and shuts down as soon as nothing is in flight, and the
  process exits within ``EXIT_AFTER_GRACE_S`` of the grace's end: past that, a watchdog
  thread ends it (``os._exit``), naming what was still running. Leftovers of work cut so (a
  half-built snapshot, an upload's temporary directory) are removed at the next start.

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

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from types import FrameType

import uvicorn
from sse_starlette.sse import AppStatus
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.server import STARTUP_FAILURE
from uvicorn.supervisors import multiprocess

from app import listeners
from app.admission import SHUTTING_DOWN, send_refusal
from app.config import get_settings
from app.heap import freeze_startup_heap
from app.read_ahead import ReadAhead
from tracing.metrics import process_gone

log = logging.getLogger("ragtime")

#: The process is gone at most this long after the grace ends (connections closed, spans
#: flushed); ``deploy/k8s`` sizes the pod's termination period with it.
EXIT_AFTER_GRACE_S = 2.0
#: A request that outlives the grace by this much is cancelled even if it is streaming.
CUT_STREAMS_AFTER_S = 0.5
#: Answered as usual during the grace: the probes (``/readyz`` says not ready) and metrics.
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


@dataclass(eq=False)
class InFlight:
    """One request being served: its task, whether its response began, whether it was cut."""

    task: asyncio.Task[object] | None
    responded: bool = False
    cut: bool = False


class Shutdown:
    """The process's stop: when it began, the grace, and the requests in flight.

    ``begin`` and ``end_grace_now`` may be called from a signal handler or another thread; the
    rest runs on the serving loop (``bind``)."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.begun_at: float | None = None
        self._ends_at = float("inf")
        #: Set whenever the grace's end moves (``begin``, ``end_grace_now``): the watchdog's
        #: wait for it.
        self.grace_moved = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._in_flight: set[InFlight] = set()
        self._cutter: asyncio.Task[None] | None = None
        self._grace_timeouts: dict[asyncio.Timeout, float] = {}

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve on ``loop`` (the app's lifespan calls it at start)."""
        self._loop = loop
        if self.begun_at is not None:
            self._start_in_loop()

    @property
    def begun(self) -> bool:
        return self.begun_at is not None

    @property
    def grace_ends_at(self) -> float:
        """When the grace ends (``time.monotonic``); infinity before the stop begins."""
        return self._ends_at

    def begin(self) -> None:
        """Begin the stop (again: nothing more). Safe in a signal handler and from any thread."""
        if self.begun_at is not None:
            return
        self.begun_at = time.monotonic()
        self._ends_at = self.begun_at + self.grace_s
        AppStatus.should_exit = True  # sse-starlette's own drain of open streams
        self._grace_changed()

    def end_grace_now(self) -> None:
        """Stop now: begin the stop if it has not begun, and end its grace at once, so that
        what is in flight ends as at any grace's end. Safe in a signal handler and from any
        thread; once the grace is over, nothing more."""
        self.begin()
        now = time.monotonic()
        if self._ends_at <= now:
            return
        self._ends_at = now
        self._grace_changed()

    def _grace_changed(self) -> None:
        self.grace_moved.set()
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._start_in_loop)

    def _start_in_loop(self) -> None:
        """On the loop: every grace timeout set to the grace's end, and the cutter timed to it
        (started again when the end moved)."""
        for timeout, margin_s in list(self._grace_timeouts.items()):
            timeout.reschedule(self._loop_time_of_grace_end(margin_s))
        if self._cutter is not None:
            self._cutter.cancel()
        self._cutter = asyncio.ensure_future(self._cut_at_grace_end())

    @contextlib.asynccontextmanager
    async def until_grace_ends(self, margin_s: float) -> AsyncIterator[asyncio.Timeout]:
        """An ``asyncio.timeout`` that expires ``margin_s`` before the grace ends: set now if
        the stop has begun, else when it begins (``Timeout.expired()`` says whether it did).
        What it wraps runs in the caller's task, with no task or waiter of its own."""
        when = None if self.begun_at is None else self._loop_time_of_grace_end(margin_s)
        timeout = asyncio.timeout_at(when)
        self._grace_timeouts[timeout] = margin_s
        try:
            async with timeout:
                yield timeout
        finally:
            del self._grace_timeouts[timeout]

    def _loop_time_of_grace_end(self, margin_s: float) -> float:
        """``grace_ends_at - margin_s`` on the running loop's clock (``loop.time()``)."""
        now = asyncio.get_running_loop().time()
        return now + (self.grace_ends_at - margin_s - time.monotonic())

    # -- requests in flight ---------------------------------------------------------------

    def enter(self) -> InFlight:
        request = InFlight(asyncio.current_task())
        self._in_flight.add(request)
        return request

    def leave(self, request: InFlight) -> None:
        self._in_flight.discard(request)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def done(self) -> bool:
        """Whether the server may close now: the stop has begun and nothing is in flight, or
        the grace is over and what was in flight has been cut."""
        if self.begun_at is None:
            return False
        return not self._in_flight or time.monotonic() >= (
            self.grace_ends_at + CUT_STREAMS_AFTER_S + 0.1
        )

    async def _cut_at_grace_end(self) -> None:
        """At the grace's end, cancel the requests that have not begun their response (each is
        answered with a 503); a little later, whatever is left."""
        await asyncio.sleep(max(self.grace_ends_at - time.monotonic(), 0.0))
        self._cut(lambda request: not request.responded)
        await asyncio.sleep(CUT_STREAMS_AFTER_S)
        self._cut(lambda request: True)

    def _cut(self, which: Callable[[InFlight], bool]) -> None:
        for request in list(self._in_flight):
            if request.task is not None and not request.cut and which(request):
                request.cut = True
                request.task.cancel("the server is shutting down")


class ShutdownMiddleware:
    """Refuse new requests once the stop has begun (503 ``shutting_down``, in OpenAI's error
    shape on ``openai_routes``), and answer a request cut at the grace's end the same way."""

    def __init__(
        self,
        app: ASGIApp,
        shutdown: Shutdown,
        *,
        retry_after_s: int,
        openai_routes: frozenset[str] = frozenset(),
    ) -> None:
        self.app = app
        self.shutdown = shutdown
        self.retry_after_s = retry_after_s
        self.openai_routes = openai_routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in PROBE_PATHS:
            await self.app(scope, receive, send)
            return
        if self.shutdown.begun:
            await self._refuse(scope, send)
            return
        request = self.shutdown.enter()

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                request.responded = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except asyncio.CancelledError:
            if not request.cut:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            if not request.responded:
                await self._refuse(scope, send)
        finally:
            self.shutdown.leave(request)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        await send_refusal(
            scope,
            send,
            SHUTTING_DOWN,
            self.retry_after_s,
            openai=scope["path"] in self.openai_routes,
            close=True,
        )


class GracefulServer(uvicorn.Server):
    """uvicorn's server, stopping as ``Shutdown`` says: a signal begins the app's shutdown
    (found in the lifespan's state, ``STATE_KEY``) instead of closing the socket; the server
    closes it once that shutdown is done. ``hard_exit``: a watchdog ends the process
    ``EXIT_AFTER_GRACE_S`` after the grace; ``freeze_heap``: once started, the process's heap is
    frozen out of the collector's full passes (``app.heap``). Both for ``ragtime serve``, never
    in a test's thread. ``read_ahead`` (plain TCP, one socket): the socket is served as
    ``app.listeners.listen`` says, by a thread that reads requests and decides their admission
    ahead of the event loop where the app's gate decides (``app.read_ahead``)."""

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

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        config = self.config
        one_tcp_socket = not (config.is_ssl or config.uds or config.fd is not None) and (
            sockets is None or len(sockets) == 1
        )
        if not (self.read_ahead and one_tcp_socket):
            await super().startup(sockets)
        else:
            # Bound before the app starts, as uvicorn would; uvicorn itself then listens on none.
            listener = sockets[0] if sockets else config.bind_socket()
            try:
                listener.listen(config.backlog)
                await super().startup([])
                self.reader = await listeners.listen(self, listener)
            except BaseException:
                listener.close()
                raise
        if self.freeze_heap:
            freeze_startup_heap()

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
        """uvicorn's SIGINT and SIGTERM handlers, and SIGQUIT's too (stop now), while serving."""
        with super().capture_signals():
            if threading.current_thread() is not threading.main_thread():
                yield  # signals reach the main thread only, as uvicorn says
                return
            previous = signal.signal(signal.SIGQUIT, self.handle_exit)
            try:
                yield
            finally:
                signal.signal(signal.SIGQUIT, previous)

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
                self._captured_signals.append(sig)
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


class GracefulProcess(multiprocess.Process):
    """One of ``ragtime serve --workers N``'s processes, serving with ``GracefulServer``: on
    the supervisor's socket, or, given none, on a socket of its own (``app.listeners``)."""

    def target(self, sockets: list[socket.socket] | None = None) -> None:  # pragma: no cover
        if not sockets:
            sockets = [listeners.listening(self.config)]
        super().target(sockets)

    @property
    def server(self) -> uvicorn.Server:
        if self._server is None:
            self._server = serving_server(self.config)
        return self._server

    def join(self) -> None:
        super().join()
        process_gone(self.process.pid)  # its live gauges leave /metrics with it


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


def serve(config: uvicorn.Config) -> None:
    """Serve ``config`` as ``uvicorn.run`` would, each process with ``GracefulServer``."""
    if config.workers > 1:
        # Each worker on a socket of its own, the kernel spreading connections (the supervisor
        # only holds the address), or all on the supervisor's one socket.
        spread = get_settings().serve_reuse_port and listeners.supported()
        sock = listeners.reserve(config) if spread else config.bind_socket()
        if spread:
            log.info(
                "serving on http://%s:%d: %d processes, each on its own socket (SO_REUSEPORT)",
                config.host,
                config.port,
                config.workers,
            )
        # uvicorn's supervisor makes its workers with its module's ``Process`` (in this
        # parent only: each worker unpickles the GracefulProcess it was given).
        original = multiprocess.Process
        multiprocess.Process = GracefulProcess  # type: ignore[misc]
        try:
            with sock:
                multiprocess.Multiprocess(config, sockets=[] if spread else [sock]).run()
        finally:
            multiprocess.Process = original  # type: ignore[misc]
        return
    server = serving_server(config)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)
