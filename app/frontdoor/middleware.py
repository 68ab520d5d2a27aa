"""The door in the ASGI app: the arrival stamp of requests no protocol of ours read
(``ArrivalMiddleware``), and the admission decision for those that reach the app undecided
(``AdmissionMiddleware``).

``ArrivalMiddleware`` is the app's outermost layer and the arrival clock's one fallback
(``app.frontdoor.gate``): under ``ragtime serve`` the HTTP protocol stamps every request as it
parses it, and this stamps those it did not (another server, httpx's ASGI transport, a test
client), once, before anything else of ours sees them.

Under ``ragtime serve`` the HTTP protocol decides most question requests as they are parsed
(``app.frontdoor.protocol``); it lets through, undecided, what it does not take (a body too
large to read ahead, ``Expect: 100-continue``, no key) and everything when another server or a
test client serves the app. This middleware (pure ASGI, in front of routing, auth and the body's
parsing) makes the same decision for those, with the same gate (``Gate.admit``) and the same
refusal. A small body is read here for its budget and replayed to the route.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.frontdoor.gate import PEEK_BYTES, TICKET, Gate, Refused, budget_readable


class ArrivalMiddleware:
    """Stamp a request's arrival (``arrived_at``) where no protocol of ours did: when this
    layer saw it, less the event loop's recent lag (``lag_ms``: ``tracing.loop_lag``), as long
    as it may have waited for the loop. No read was timed, so no ``read_at``."""

    def __init__(self, app: ASGIApp, lag_ms: Callable[[], float]) -> None:
        self.app = app
        self.lag_ms = lag_ms

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            state = scope.setdefault("state", {})
            if "arrived_at" not in state:
                state["arrived_at"] = time.perf_counter() - self.lag_ms() / 1000.0
        await self.app(scope, receive, send)


class AdmissionMiddleware:
    """Admit the gate's question routes' requests, or refuse them at once; let through what
    the protocol admitted already (its ticket in the request's state)."""

    def __init__(self, app: ASGIApp, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gate = self.gate
        if (
            scope["type"] != "http"
            or scope["path"] not in gate.routes
            or TICKET in scope.get("state", {})
        ):
            await self.app(scope, receive, send)  # (admitted already, as it was parsed)
            return
        body, receive = await peek_body(scope, receive)
        verdict = gate.admit(scope, body)
        if isinstance(verdict, Refused):
            await gate.refusal(scope, verdict).send(send)
            gate.refused(scope, verdict)
            return
        await gate.admitted(self.app, verdict)(scope, receive, send)


async def peek_body(scope: Scope, receive: Receive) -> tuple[bytes, Receive]:
    """The request's body when it may hold its budget (``budget_readable``: a key, and a small
    declared body), else nothing; and a ``receive`` that replays what was read."""
    if not budget_readable(scope):
        return b"", receive
    messages: list[Message] = []
    body = b""
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        body += message.get("body", b"")
        if not message.get("more_body") or len(body) > PEEK_BYTES:
            break

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return body, replay
