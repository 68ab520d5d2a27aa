"""Admission as a question request is parsed, before any task is made for it (issue 22 §1), on
uvicorn's httptools protocol: the one module that relies on uvicorn's private API.

A decision in the ASGI middleware comes in a request's first step. In a burst that step waits
behind the first steps of every request accepted before it in the same turn of the event loop
(their auth, parsing and planning), so a refusal waited behind the work it refused.
``AdmittingProtocol``, the HTTP protocol ``ragtime serve`` runs, makes the gate's decision
(``app.frontdoor.gate.Gate.admit``) in the parser's own callback instead, once a question
request's small body is read (in the same ``data_received`` as its headers, as a small request
comes):

- refused: the gate's 503 is written to the socket there and then, counted, logged and traced
  (``Gate.refused``); no task, no middleware, no route;
- admitted: its task starts as uvicorn's would, holding its ticket (``Gate.admitted``), and the
  middleware lets it through.

Every request's arrival is stamped here as its headers are parsed (``gate.stamp_arrival``), less
how long its bytes waited in the kernel before that read (``app.frontdoor.socket_wait``: the
connection's own figure, to a jiffy; ``ragtime_request_socket_wait_seconds``). In bursts that
wait was 0-340 ms: the connections queue in the kernel while the loop works through the requests
read before them (docs/studies/front-door.md, "How long a burst's requests wait before they are
read").

Requests the gate does not take (other routes, other methods, no key, a body over
``PEEK_BYTES``, ``Expect: 100-continue``, a stop begun) go to the app as they would without it,
and the middleware decides for them. During a stop nothing is refused here: every request goes
to the app, whose ``ShutdownMiddleware`` is the stop's one refuser. The gate comes from the
app's lifespan state (``GATE_KEY``), so the protocol needs nothing else.

A connection another reader read first (the opt-in read-ahead plug-in,
``app.frontdoor.read_ahead``, reads a connection's first request before this protocol does)
comes with what that reader read: a ``HandOver``, which gives its bytes, stamps the first
request's arrival as it was read there, and holds the ticket where it admitted that request.
The protocol then serves them as it would have served its own read. It knows nothing more of
that reader, and imports nothing of it.

uvicorn's private names used here, each checked against the installed uvicorn by
``tests/app/frontdoor/test_uvicorn_private_api.py``: ``HttpToolsProtocol`` and its
``_start_asgi_task``, ``_unset_keepalive_if_required``, ``on_headers_complete``,
``on_message_begin``, ``on_message_complete``, ``on_response_complete``, ``app_state``,
``scope``, ``cycle``, ``access_logger``, ``transport``; ``RequestResponseCycle`` and its
``body``, ``more_body``, ``keep_alive``, ``waiting_for_100_continue``, ``default_headers``,
``response_started``, ``response_complete``; ``uvicorn._types.ASGI3Application``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Protocol, cast

from starlette.types import ASGIApp, Scope
from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from app.frontdoor import socket_wait
from app.frontdoor.gate import GATE_KEY, Gate, Refused, stamp_arrival
from tracing import metrics
from tracing.budget.door.ticket import Ticket


class HandOver(Protocol):
    """What another reader read of a connection before this protocol took it
    (``AdmittingProtocol.take_over``)."""

    @property
    def data(self) -> bytes:
        """The bytes read, parsed here before any the connection sends later."""
        ...

    @property
    def admitted(self) -> bool:
        """Whether the first request among them was admitted there, its ticket not yet taken."""
        ...

    def stamp_first_arrival(self, state: dict[str, Any]) -> bool:
        """Stamp the first request's arrival in its ``state``, as it was read there, and say
        so; ``False`` for every later request, which this protocol stamps as it reads it."""
        ...

    def take_ticket(self) -> Ticket | None:
        """The ticket the first request was admitted with, once: whoever takes it serves the
        request or gives its place back."""
        ...


class AdmittingProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, deciding question requests as they are parsed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: tuple[RequestResponseCycle, ASGI3Application] | None = None
        """A question request whose body is still being parsed: its cycle and app."""
        self.handed_over: HandOver | None = None
        """What another reader read of the connection first (``take_over``)."""

    def _gate(self) -> Gate | None:
        gate = self.app_state.get(GATE_KEY)
        return gate if isinstance(gate, Gate) else None

    def take_over(self, handed_over: HandOver) -> None:
        """Serve a connection another reader read first, from what it read; called before
        ``connection_made``."""
        self.handed_over = handed_over

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.handed_over is not None and self.handed_over.data:
            self.data_received(self.handed_over.data)

    def _preadmitted(self) -> Ticket | None:
        """The ticket the first request was admitted with before this protocol took it, once."""
        return None if self.handed_over is None else self.handed_over.take_ticket()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # A refusal ends its response while its bytes are parsed, so the keep-alive timer it
        # arms can still be running when the next request of the same read begins (uvicorn
        # stops it only as data arrives): stopped here, it cannot close that request.
        self._unset_keepalive_if_required()

    def on_headers_complete(self) -> None:
        gate, handed_over, state = self._gate(), self.handed_over, self.scope["state"]
        # Read and measured before this protocol took the connection, or read here now.
        stamped_there = handed_over is not None and handed_over.stamp_first_arrival(state)
        if not stamped_there and gate is not None:  # the budget counts from here (the docstring)
            read_at = time.perf_counter()
            sock = self.transport.get_extra_info("socket")
            waited_s = socket_wait.waited_ms(sock, gate.lag_ms()) / 1000.0
            stamp_arrival(state, read_at, waited_s)
            metrics.REQUEST_SOCKET_WAIT_SECONDS.observe(waited_s)
        super().on_headers_complete()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        gate, scope = self._gate(), cast(Scope, cycle.scope)
        preadmitted = self.handed_over is not None and self.handed_over.admitted
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
            gate.finished(ticket, learn=False)
        super().connection_lost(exc)

    def _decide(self, gate: Gate, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        scope = cast(Scope, cycle.scope)
        preadmitted = self._preadmitted()
        if preadmitted is None and not gate.takes(scope):  # a stop begun since its head came
            super()._start_asgi_task(cycle, app)  # the app's stop answers it
            return
        verdict = preadmitted or gate.admit(scope, bytes(cycle.body))
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
        response = gate.refusal(scope, refused, close=not cycle.keep_alive)
        cycle.response_started = cycle.response_complete = True
        self.transport.write(response.wire(cycle.default_headers))
        gate.refused(scope, refused, self.access_logger)
        if not cycle.keep_alive:
            self.transport.close()
        self.on_response_complete()
