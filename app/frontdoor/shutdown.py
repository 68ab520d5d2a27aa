"""How the server stops (issue 24 §1): a grace for the work in flight, a 503 for what arrives
during it, and an exit on time, whatever is still running.

On SIGTERM or SIGINT (``app.frontdoor.server.GracefulServer``) the ``Shutdown`` begins:

- the socket stays open, and every new request is answered at once with 503 ``shutting_down``
  and ``Retry-After`` (``ShutdownMiddleware``; the probes and ``/metrics`` are answered as
  usual, and ``/readyz`` says not ready), so a load balancer that has not yet taken the pod out
  gets an answer it can retry elsewhere, not a refused connection. ``ShutdownMiddleware`` is the
  one place that refuses for the stop, on every route and whatever server or protocol brought
  the request: the door's gate (``app.frontdoor.gate``) takes nothing as it is parsed once the
  stop has begun, and never refuses for it;
- a live answer stream runs on for ``RAGTIME_SHUTDOWN_GRACE_S`` and then ends with an ``error``
  event ``shutting_down`` (``app.http.answers.Drain``), its generation cancelled;
- a request still in flight at the end of the grace that has not begun its response (a
  question waiting for its first token, an upload being ingested) is cancelled and answered
  with the same 503; whatever is left half a second later is cancelled as it stands;
- the server then closes its socket and shuts down as soon as nothing is in flight, and the
  process exits within ``EXIT_AFTER_GRACE_S`` of the grace's end: past that, a watchdog
  thread ends it (``os._exit``), naming what was still running. Leftovers of work cut so (a
  half-built snapshot, an upload's temporary directory) are removed at the next start.

The signals that begin and end the stop reach ``app.frontdoor.server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from sse_starlette.sse import AppStatus
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.frontdoor.gate import SHUTTING_DOWN, Refused, count_refusal, refusal

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
    """The stop's one refuser: new requests once the stop has begun (503 ``shutting_down``,
    in OpenAI's error shape on ``openai_routes``), and a request cut at the grace's end, the
    same way. Everything but the probes passes through it (``app.main`` installs it outside
    admission), so nothing else writes this refusal."""

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
        openai = scope["path"] in self.openai_routes
        refused = Refused(SHUTTING_DOWN, self.retry_after_s)
        await refusal(refused, openai=openai, close=True).send(send)
        count_refusal(scope["path"], SHUTTING_DOWN, scope["state"])
