"""Admission as a question request is parsed, before any task is made for it (issue 22 §1).

``AdmissionMiddleware`` decides in a request's first step. In a burst that step waits behind the
first steps of every request accepted before it in the same turn of the event loop (their auth,
parsing and planning), so a refusal waited behind the work it refused. ``AdmittingProtocol``, the
HTTP protocol ``ragtime serve`` runs (uvicorn's httptools protocol, subclassed), decides in the
parser's own callback instead, once a question request's small body is read (in the same
``data_received`` as its headers, as a small request comes):

- refused: its 503 (``overloaded`` with ``Retry-After``, the same bytes the middleware would
  send) is written to the socket there and then, counted and traced as the middleware's are;
  no task, no middleware, no route;
- admitted: its task starts as uvicorn's would, holding its ticket (``Gate.admitted``), and the
  middleware lets it through (``ADMITTED`` in its scope's state).

Its arrival is stamped as its headers are parsed, less the loop's recent lag: the budget counts
from there, as before this protocol. How long its bytes really waited in the kernel before that
read (``app.frontdoor.socket_wait``: the connection's own figure, to a jiffy) is measured beside it
(``received_at``, ``ragtime_request_socket_wait_seconds``), and refusals are timed from it. In
bursts that wait was 0-340 ms, against a loop lag of 16-90 ms: the connections queue in the
kernel while the loop works through the requests read before them (BENCHMARKS.md, "How long
a burst's requests wait before they are read"). Counting budgets from it made admission refuse
requests that the old clock answered in time on the client's, so budgets keep the lag.

Requests the gate does not take (other routes, other methods, no key, a body over
``PEEK_BYTES``, ``Expect: 100-continue``, a stop begun) go to the app as they would without it,
and the middleware decides for them. The gate comes from the app's lifespan state
(``GATE_KEY``), so the protocol needs nothing else.

Under ``ragtime serve`` a connection's first request is usually read, and decided, earlier
still, by the thread that reads ahead of the event loop (``app.frontdoor.read_ahead``). It hands the
connection over with what it read (a ``Prelude``): its bytes, when they were read and received,
and the ticket where it admitted the request. The protocol then serves them as it would have
served its own read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from opentelemetry import trace
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

from app.frontdoor import socket_wait
from app.frontdoor.gate import (
    ADMITTED,
    Admission,
    Refused,
    budget_in,
    budget_readable,
    count_refusal,
    refusal_body,
    refusal_headers,
    serve_admitted,
)
from tracing import metrics
from tracing.budget.door.book import Ticket

#: Where the app's lifespan state holds the ``Gate``.
GATE_KEY = "ragtime.admission_gate"

tracer = trace.get_tracer(__name__)


class Stop(Protocol):
    """Whether the server's stop has begun (``app.frontdoor.shutdown.Shutdown``)."""

    @property
    def begun(self) -> bool: ...


@dataclass(frozen=True)
class Gate:
    """What deciding at the protocol needs: the process's admission, the question routes (and
    which answer in OpenAI's shape), the stop, and the loop's recent lag in ms."""

    admission: Admission
    routes: frozenset[str]
    openai_routes: frozenset[str]
    shutdown: Stop
    lag_ms: Callable[[], float]
    decides: bool = True
    """Off (``RAGTIME_ADMIT_AS_PARSED=false``): requests are only stamped here."""

    def waited_ms(self, sock: Any) -> float:
        """How long the request being parsed waited on ``sock`` (``app.frontdoor.socket_wait``)."""
        return socket_wait.waited_ms(sock, self.lag_ms())

    def takes(self, scope: Scope) -> bool:
        """Whether this request is decided here: a question with a key and a small body, while
        admission by predicted finish runs and no stop has begun."""
        return (
            self.decides
            and scope["method"] == "POST"
            and scope["path"] in self.routes
            and self.admission.finish is not None
            and not self.admission.draining
            and not self.shutdown.begun
            and budget_readable(scope)
        )

    def admit(self, scope: Scope, body: bytes, arrived: float) -> Ticket | Refused:
        """A place and a ticket for the request (with the budget its body asks for), or why
        not."""
        admission = self.admission
        reason = admission.try_enter()
        if reason is not None:
            return Refused(reason, admission.retry_after_s)
        budget_ms = budget_in(body, admission.default_budget_ms)
        try:
            verdict = admission.decide(scope["path"], arrived=arrived, budget_ms=budget_ms)
        except BaseException:
            admission.leave()
            raise
        if isinstance(verdict, Refused):
            admission.leave()
        return verdict

    def release(self, ticket: Ticket) -> None:
        """Give back an admitted request's place and ticket, the request never served (its
        connection lost before it started)."""
        ticket.finish(learn=False)
        self.admission.leave()

    def admitted(self, app: ASGIApp, ticket: Ticket) -> ASGIApp:
        """``app`` for one admitted request: served with its ticket, its place given back when
        it ends, however it ends."""

        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            scope["state"][ADMITTED] = True
            try:
                await serve_admitted(app, ticket, scope, receive, send)
            finally:
                self.admission.leave()

        return serve

    def refusal(
        self,
        scope: Scope,
        refused: Refused,
        default_headers: list[tuple[bytes, bytes]],
        *,
        keep_alive: bool,
    ) -> bytes:
        """The refusal's response on the wire: the middleware's headers and body after the
        server's ``default_headers``, and ``connection: close`` unless ``keep_alive``."""
        openai = scope["path"] in self.openai_routes
        body = refusal_body(refused.reason, openai=openai, detail=refused.detail)
        content = [STATUS_LINE[503]]
        for name, value in [*default_headers, *refusal_headers(body, refused.retry_after_s)]:
            content.extend([name, b": ", value, b"\r\n"])
        if not keep_alive:
            content.append(b"connection: close\r\n")
        content.extend([b"\r\n", body])
        return b"".join(content)

    def refused(
        self,
        scope: Scope,
        refused: Refused,
        access_logger: logging.Logger,
        sent_at: float | None = None,
    ) -> None:
        """Log, count and trace a refusal sent, just now or at ``sent_at``: its line in
        uvicorn's access log (where that log is on), the admission's counters, the request
        metrics and a server span, as a refusal in the middleware gets them."""
        if access_logger.hasHandlers():
            access_logger.info(
                '%s - "%s %s HTTP/%s" %d',
                get_client_addr(scope),  # type: ignore[arg-type]
                scope["method"],
                get_path_with_query_string(scope),  # type: ignore[arg-type]
                scope["http_version"],
                503,
            )
        route, arrived = scope["path"], scope["state"]["arrived_at"]
        now = time.perf_counter() if sent_at is None else sent_at
        count_refusal(route, refused.reason, scope["state"], now)
        metrics.REQUESTS.labels(route=route, status="503").inc()
        metrics.REQUEST_SECONDS.labels(route=route).observe(now - arrived)
        start_ns = time.time_ns() - int((now - arrived) * 1e9)
        span = tracer.start_span(
            f"{scope['method']} {route}",
            kind=trace.SpanKind.SERVER,
            start_time=start_ns,
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


@dataclass(eq=False)
class Prelude:
    """What was read of a connection before this protocol took it (``app.frontdoor.read_ahead``):
    its bytes, and for the first request among them, when it was read and received, and its
    ticket where it was admitted there."""

    data: bytes
    read_at: float
    received_at: float
    ticket: Ticket | None = None
    stamps_taken: bool = False

    def take_ticket(self) -> Ticket | None:
        """The ticket the first request was admitted with, once: whoever takes it serves the
        request or gives its place back."""
        ticket, self.ticket = self.ticket, None
        return ticket


class AdmittingProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, deciding question requests as they are parsed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: tuple[RequestResponseCycle, ASGI3Application] | None = None
        """A question request whose body is still being parsed: its cycle and app."""
        self.prelude: Prelude | None = None
        """Set before ``connection_made`` by the thread that read the connection first."""

    def _gate(self) -> Gate | None:
        gate = self.app_state.get(GATE_KEY)
        return gate if isinstance(gate, Gate) else None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.prelude is not None and self.prelude.data:
            self.data_received(self.prelude.data)

    def _preadmitted(self) -> Ticket | None:
        """The ticket the first request was admitted with before this protocol took it, once."""
        return None if self.prelude is None else self.prelude.take_ticket()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # A refusal ends its response while its bytes are parsed, so the keep-alive timer it
        # arms can still be running when the next request of the same read begins (uvicorn
        # stops it only as data arrives): stopped here, it cannot close that request.
        self._unset_keepalive_if_required()

    def on_headers_complete(self) -> None:
        gate, prelude = self._gate(), self.prelude
        if prelude is not None and not prelude.stamps_taken:  # read and measured before
            prelude.stamps_taken = True
            state = self.scope["state"]
            state["read_at"] = prelude.read_at
            state["arrived_at"] = state["received_at"] = prelude.received_at
        elif gate is not None:  # the budget counts from here (``RequestMetricsMiddleware``)
            state = self.scope["state"]
            state["read_at"] = read_at = time.perf_counter()
            state["arrived_at"] = read_at - gate.lag_ms() / 1000.0
            waited_ms = gate.waited_ms(self.transport.get_extra_info("socket"))
            state["received_at"] = read_at - waited_ms / 1000.0
            metrics.REQUEST_SOCKET_WAIT_SECONDS.observe(waited_ms / 1000.0)
        super().on_headers_complete()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        gate, scope = self._gate(), cast(Scope, cycle.scope)
        preadmitted = self.prelude is not None and self.prelude.ticket is not None
        if gate is None or not (
            preadmitted or (not cycle.waiting_for_100_continue and gate.takes(scope))
        ):
            super()._start_asgi_task(cycle, app)
            return
        if cycle.more_body:  # decided once its body is read: ``on_message_complete``
            self._held = (cycle, app)
            return
        self._decide(gate, cycle, app)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        held, self._held = self._held, None
        if held is None or held[0] is not self.cycle:
            return
        gate = self._gate()
        if gate is not None:
            self._decide(gate, *held)

    def connection_lost(self, exc: Exception | None) -> None:
        self._held = None  # never started: nothing was taken for it
        gate, ticket = self._gate(), self._preadmitted()
        if gate is not None and ticket is not None:  # admitted, never started
            gate.release(ticket)
        super().connection_lost(exc)

    def _decide(self, gate: Gate, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        scope = cast(Scope, cycle.scope)
        verdict = self._preadmitted() or gate.admit(
            scope, bytes(cycle.body), scope["state"]["arrived_at"]
        )
        if isinstance(verdict, Refused):
            self._refuse(gate, cycle, verdict)
            return
        # Starlette's ASGI types and uvicorn's spell the same app two ways.
        served = cast(ASGI3Application, gate.admitted(cast(ASGIApp, app), verdict))
        super()._start_asgi_task(cycle, served)

    def _refuse(self, gate: Gate, cycle: RequestResponseCycle, refused: Refused) -> None:
        """Write the 503 now, as ``RequestResponseCycle.send`` would write it, and go on with
        the connection as after any response."""
        scope = cast(Scope, cycle.scope)
        response = gate.refusal(scope, refused, cycle.default_headers, keep_alive=cycle.keep_alive)
        cycle.response_started = cycle.response_complete = True
        self.transport.write(response)
        gate.refused(scope, refused, self.access_logger)
        if not cycle.keep_alive:
            self.transport.close()
        self.on_response_complete()
