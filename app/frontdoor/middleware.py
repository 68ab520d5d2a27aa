"""The door's decision for requests that reach the ASGI app undecided (``AdmissionMiddleware``).

Under ``ragtime serve`` the HTTP protocol decides most question requests as they are parsed
(``app.frontdoor.protocol``); it lets through, undecided, what it does not take (a body too
large to read ahead, ``Expect: 100-continue``, no key) and everything when another server or a
test client serves the app. This middleware (pure ASGI, in front of routing, auth and the body's
parsing) makes the same decision for those, with the same gate (``Gate.admit``) and the same
refusal. A small body is read here for its budget and replayed to the route.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.frontdoor.gate import PEEK_BYTES, TICKET, Gate, Refused, budget_readable


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
