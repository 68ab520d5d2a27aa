"""The door's one admission decision, the one refusal it writes, and the one arrival clock.

A process that accepts every request collapses under overload: each admitted request slows every
other, until none finishes within its budget (issue 13, finding 2). A fixed cap on requests in
flight refuses work that fits (issue 22). So a question request (``Gate.routes``) is admitted
when the work ahead of it lets it finish within its budget (``Gate.admit``):

1. a place: no stop has begun, and the process's bound (``Admission``: ``max_in_flight`` plus
   the decoding slots of the remote generation servers serving now) is not full;
2. a ticket: ``tracing.budget.door.book.FinishAdmission`` predicts the request's finish from the
   requests ahead of it in the process's own work, against its budget, read as the route will
   read it (``app.http.limits.door_budget``: ``budget_ms`` in the body, else ``Request-Timeout-Ms``,
   else the default; where the route would answer 400 or 422, the default).

The book's tickets are the process's one count of question requests in flight: a ticket is the
request's place, held until its response ends (``Gate.finished``). (The stop's set of requests
to cut at the grace's end, ``Shutdown``, is not a count: it holds every request's task.)

A request not admitted is refused at once, before any of its work is done: 503 ``overloaded``
with ``Retry-After`` (the time for the work ahead to drain). Every path writes that refusal from
``refusal``: the ASGI middleware (``app.frontdoor.middleware``), uvicorn's HTTP protocol as the
request is parsed (``app.frontdoor.protocol``), and the opt-in read-ahead thread
(``app.frontdoor.read_ahead``). Each is counted in ``ragtime_admission_refused_total`` (by route
and reason), logged and traced the same way (``Gate.refused``); the error-ratio alert takes
refusals out of both sides of its ratio (``deploy/prometheus/alerts.yml``).

The stop is not the gate's to answer: once it has begun, the gate takes nothing as it is parsed
(``Gate.takes``), and every request but the probes, on every route and over every server, meets
the stop's one refuser, ``app.frontdoor.shutdown.ShutdownMiddleware`` (503 ``shutting_down``,
written from the same ``refusal``). ``Gate.admit`` decides by places and predicted finish only.

**The arrival clock** (``arrived``, on ``time.perf_counter``): a request's budget starts when it
reached us: when the first of our code to see it read its headers (``stamp_arrival``), less how
long its bytes had already waited in the kernel where that is known (``app.frontdoor.socket_wait``;
the read-ahead thread has the kernel's own stamp). The serve path (the HTTP protocol, the
read-ahead thread) stamps the same two figures in the request's state: ``arrived_at`` (the
budget's start) and ``read_at``. A request no protocol of ours read (another server, a test
client) is stamped once, by the app's outermost layer, ``ArrivalMiddleware``
(``app.frontdoor.middleware``): ``arrived_at`` only, no read being timed. Those are the only
stamps; every reader (admission, refusals, the request's ledger) reads ``arrived_at`` as it is.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry import trace
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracing import metrics
from tracing.budget.door.book import FinishAdmission
from tracing.budget.door.ticket import Refusal, Ticket

#: Bodies up to this size are read for their ``budget_ms`` before admission decides.
PEEK_BYTES = 16 * 1024

OVERLOADED = "overloaded"
SHUTTING_DOWN = "shutting_down"

#: Where the app's lifespan state holds the ``Gate`` (the protocol's and read-ahead's way to it).
GATE_KEY = "ragtime.admission_gate"

#: Where an admitted request's state holds its ticket: the request's ledger carries it to the
#: budget session (``app.http.deps.get_ledger``). Its presence also tells the middleware the request
#: was admitted already, as it was parsed.
TICKET = "admission_ticket"

tracer = trace.get_tracer(__name__)


class Stop(Protocol):
    """Whether the server's stop has begun (``app.frontdoor.shutdown.Shutdown``)."""

    @property
    def begun(self) -> bool: ...


@dataclass(frozen=True)
class Refused:
    """A request not admitted: why (``overloaded``; ``shutting_down``: the stop's refusal,
    ``app.frontdoor.shutdown``), when to retry."""

    reason: str
    retry_after_s: int
    detail: str = ""


class Admission:
    """The process's places for question requests: its bound, and the book whose tickets are
    the places taken."""

    def __init__(
        self,
        max_in_flight: int,
        *,
        retry_after_s: int,
        finish: FinishAdmission,
        remote_slots: Callable[[], int] = lambda: 0,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self.retry_after_s = retry_after_s
        self.finish = finish
        """Admission by predicted finish: its tickets are the places taken."""
        self.remote_slots = remote_slots
        """The remote generation servers' slots now (over the backend, given by the app)."""

    @property
    def bound(self) -> int:
        """Requests admitted at most now: ``max_in_flight`` plus the remote slots."""
        return self.max_in_flight + max(self.remote_slots(), 0)

    @property
    def in_flight(self) -> int:
        """Question requests admitted and not yet finished: the book's tickets."""
        return self.finish.admitted

    @property
    def full(self) -> bool:
        return self.in_flight >= self.bound


@dataclass(frozen=True)
class Gate:
    """The door of one process: its admission, the question routes (and which answer in
    OpenAI's shape), the stop, how a budget is read, and the loop's recent lag in ms."""

    admission: Admission
    routes: frozenset[str]
    openai_routes: frozenset[str]
    shutdown: Stop
    budget_ms: Callable[[bytes, str | None], float]
    """The budget admission counts with, from the body and the ``Request-Timeout-Ms`` header
    (``app.http.limits.door_budget``)."""
    lag_ms: Callable[[], float]
    decides: bool = True
    """Off (``RAGTIME_ADMIT_AS_PARSED=false``): the protocol only stamps arrivals, and the
    middleware decides for every request."""

    def takes(self, scope: Scope) -> bool:
        """Whether the protocol decides this request as it is parsed: a question with a key and
        a small body, while admission by predicted finish runs and no stop has begun (during a
        stop, the app's ``ShutdownMiddleware`` answers every request)."""
        return (
            self.decides
            and scope["method"] == "POST"
            and scope["path"] in self.routes
            and not self.shutdown.begun
            and budget_readable(scope)
        )

    def admit(self, scope: Scope, body: bytes) -> Ticket | Refused:
        """THE decision, for every path: a ticket for the request, which is its place until
        ``finished``, or why not (a refusal holds no place). The stop is not asked here: a
        request admitted as the stop begins meets ``ShutdownMiddleware``, and its ticket is
        given back with its 503."""
        admission = self.admission
        state = scope["state"]
        book = admission.finish
        with book.lock:  # the place and the ticket at once: the loop and the read-ahead decide
            if admission.full:
                return Refused(OVERLOADED, admission.retry_after_s)
            timeout = dict(scope.get("headers") or []).get(b"request-timeout-ms")
            budget_ms = self.budget_ms(body, None if timeout is None else timeout.decode("latin-1"))
            verdict = book.issue(scope["path"], arrived=state["arrived_at"], budget_ms=budget_ms)
        if isinstance(verdict, Refusal):
            return Refused(OVERLOADED, verdict.retry_after_s, str(verdict))
        return verdict

    def finished(self, ticket: Ticket, *, learn: bool) -> None:
        """An admitted request's end (``learn``: it was answered, and its time teaches the
        model): its ticket, and so its place, given back."""
        ticket.finish(learn=learn)

    def admitted(self, app: ASGIApp, ticket: Ticket) -> ASGIApp:
        """``app`` for one admitted request: served with its ticket in its state, which is
        finished (learning from it only if it was a 200), and its place given back, when its
        response ends, however it ends."""

        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            status = 500

            async def watch(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                await send(message)

            scope["state"][TICKET] = ticket
            try:
                await app(scope, receive, watch)
            finally:
                self.finished(ticket, learn=status == 200)

        return serve

    def refused(
        self,
        scope: Scope,
        refused: Refused,
        access_logger: logging.Logger | None = None,
        sent_at: float | None = None,
    ) -> None:
        """Count and time a refusal sent, just now or at ``sent_at``; where it was written to
        the socket (``access_logger`` given: the protocol, the read-ahead thread), also its
        access log line, the request metrics and a server span, as the app gives any response."""
        now = time.perf_counter() if sent_at is None else sent_at
        route, state = scope["path"], scope["state"]
        count_refusal(route, refused.reason, state, now)
        if access_logger is None:
            return
        if access_logger.hasHandlers():
            client, query = scope.get("client"), scope.get("query_string", b"")
            access_logger.info(
                '%s - "%s %s HTTP/%s" %d',
                f"{client[0]}:{client[1]}" if client else "-",
                scope["method"],
                f"{route}?{query.decode('ascii')}" if query else route,
                scope["http_version"],
                503,
            )
        arrived = state["arrived_at"]
        metrics.REQUESTS.labels(route=route, status="503").inc()
        metrics.REQUEST_SECONDS.labels(route=route).observe(now - arrived)
        span = tracer.start_span(
            f"{scope['method']} {route}",
            kind=trace.SpanKind.SERVER,
            start_time=time.time_ns() - int((now - arrived) * 1e9),
            attributes={
                "http.method": scope["method"],
                "http.route": route,
                "http.target": route,
                "http.status_code": 503,
                "ragtime.admission.refused": refused.reason,
                "ragtime.admission.detail": refused.detail,
            },
        )
        span.set_status(trace.Status(trace.StatusCode.ERROR, refused.reason))
        span.end()

    def refusal(self, scope: Scope, refused: Refused, *, close: bool = False) -> Response:
        """The refusal's response, in OpenAI's error shape on its compatible routes."""
        return refusal(refused, openai=scope["path"] in self.openai_routes, close=close)


def stamp_arrival(state: dict[str, Any], read_at: float, waited_s: float) -> None:
    """The arrival clock (the module's docstring): the request's headers were read at
    ``read_at``, its bytes having waited ``waited_s`` in the kernel before that."""
    state["read_at"] = read_at
    state["arrived_at"] = read_at - max(waited_s, 0.0)


@dataclass(frozen=True)
class Response:
    """A response to write: its status, headers and body."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    async def send(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body})

    def wire(self, default_headers: list[tuple[bytes, bytes]]) -> bytes:
        """The response as HTTP/1.1 bytes, after the server's ``default_headers``."""
        content = [b"HTTP/1.1 %d Service Unavailable\r\n" % self.status]
        for name, value in [*default_headers, *self.headers]:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend([b"\r\n", self.body])
        return b"".join(content)


def refusal(refused: Refused, *, openai: bool = False, close: bool = False) -> Response:
    """THE refusal: 503 with ``Retry-After`` and a JSON body in the service's error shape, or
    OpenAI's; ``close``: and ask the client to close the connection."""
    message = (
        "the server is shutting down; retry on another instance"
        if refused.reason == SHUTTING_DOWN
        else "the server is at capacity; retry after the time in Retry-After"
    )
    if refused.detail:
        message = f"{message} ({refused.detail})"
    if openai:
        error = {"message": message, "type": "server_error", "param": None, "code": refused.reason}
        body = json.dumps({"error": error}).encode()
    else:
        body = json.dumps({"error": {"type": refused.reason, "message": message}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(refused.retry_after_s).encode()),
    ]
    if close:
        headers.append((b"connection", b"close"))
    return Response(503, headers, body)


def count_refusal(
    route: str, reason: str, state: Mapping[str, Any], sent_at: float | None = None
) -> None:
    """Count a refusal sent, just now or at ``sent_at`` (``ragtime_admission_refused_total``),
    and time it from the request's arrival (``arrived_at``) and, where a read was timed, its
    read (``read_at``)."""
    metrics.ADMISSION_REFUSED.labels(route=route, reason=reason).inc()
    now = time.perf_counter() if sent_at is None else sent_at
    metrics.ADMISSION_REFUSAL_SECONDS.observe(now - state["arrived_at"])
    if "read_at" in state:
        metrics.ADMISSION_REFUSAL_AFTER_READ_SECONDS.observe(now - state["read_at"])


def budget_readable(scope: Scope) -> bool:
    """Whether the request's budget is read from its body: it carries a key (a request
    without one never has its body read: it gets its 401 first) and declares a body of at
    most ``PEEK_BYTES``."""
    headers = dict(scope.get("headers") or [])
    declared = headers.get(b"content-length", b"")
    scheme = headers.get(b"authorization", b"").partition(b" ")[0].lower()
    return scheme == b"bearer" and declared.isdigit() and int(declared) <= PEEK_BYTES
