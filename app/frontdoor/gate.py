"""Admission control: which question requests one process takes on, and the rest refused at once.

A process that accepts every request collapses under overload: each admitted request slows every
other, until none finishes within its budget (issue 13, finding 2). A fixed cap on requests in
flight refuses work that fits (issue 22). ``AdmissionMiddleware`` (pure ASGI, in front of
routing, auth and the body's parsing) admits a question request when the work ahead of it lets
it finish within its budget: ``tracing.budget.door.book.FinishAdmission`` predicts that finish
from the requests ahead in the process's own work. The budget is read from the JSON body's
``budget_ms`` (a small body is already in the server's buffer; a large one, or none, or one
sent without a key, counts with the default budget). A request that would not finish is
refused at once, before any of its work is done: 503 ``overloaded`` with ``Retry-After`` (the
time for the work ahead to drain). Under ``ragtime serve`` the same decision is made earlier
still, in the HTTP protocol as the request is parsed (``app.frontdoor.protocol``), or by the
thread that reads requests ahead of the event loop (``app.frontdoor.read_ahead``): the middleware
then lets the admitted request through (``ADMITTED``) and decides only for what neither took.
``max_in_flight`` (plus the decoding slots of the remote generation servers serving now,
``GenerationBackend.remote_slots``) remains a hard bound on what one process holds.

From the moment the server is told to stop, every new request is refused with 503
``shutting_down`` (``app.frontdoor.shutdown``), and the live ones are let finish within the grace.

Refusals are deliberate, not failures: each is counted in ``ragtime_admission_refused_total``
(by route and reason), and the error-ratio alert takes them out of both sides of its ratio
(``deploy/prometheus/alerts.yml``, ``tracing/_alert_conditions.py``). The per-pool bound (how much
generation a target may have queued) is the budget engine's: ``BudgetEngine.admit``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracing import metrics
from tracing.budget.door.book import FinishAdmission, Refusal, Ticket, hold, release

#: Bodies up to this size are read for their ``budget_ms`` before admission decides.
PEEK_BYTES = 16 * 1024

OVERLOADED = "overloaded"
SHUTTING_DOWN = "shutting_down"

#: Set in a request's ``scope["state"]`` when it was admitted as it was parsed
#: (``app.frontdoor.protocol``): the middleware lets it through.
ADMITTED = "ragtime.admitted"


@dataclass(frozen=True)
class Refused:
    """A question request not admitted: why (``overloaded``, ``shutting_down``), when to retry."""

    reason: str
    retry_after_s: int
    detail: str = ""


class Admission:
    """The process's count of question requests in flight, its bound, and whether it drains."""

    def __init__(
        self,
        max_in_flight: int,
        *,
        retry_after_s: int,
        remote_slots: Callable[[], int] = lambda: 0,
        finish: FinishAdmission | None = None,
        default_budget_ms: float = 15_000.0,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self.retry_after_s = retry_after_s
        self.remote_slots = remote_slots
        """The remote generation servers' slots now (set once the backend is built)."""
        self.finish = finish
        """Admission by predicted finish (``None``: the bound alone)."""
        self.default_budget_ms = default_budget_ms
        self.in_flight = 0
        self.draining = False
        self._lock = threading.Lock()
        """Places are taken on the event loop and on the thread reading ahead of it
        (``app.frontdoor.read_ahead``)."""

    def try_enter(self) -> str | None:
        """Take a place, or say why not (``overloaded``, ``shutting_down``)."""
        if self.draining:
            return SHUTTING_DOWN
        with self._lock:
            if self.in_flight >= self.bound:
                return OVERLOADED
            self.in_flight += 1
        return None

    def decide(self, route: str, *, arrived: float, budget_ms: float) -> Ticket | Refused:
        """With a place taken (``try_enter``): a ticket when the request is predicted to finish
        within ``budget_ms`` of ``arrived`` (``FinishAdmission.admit``), else why not."""
        if self.finish is None:
            raise RuntimeError("admission by predicted finish is not configured")
        decision = self.finish.admit(route, arrived=arrived, budget_ms=budget_ms)
        if isinstance(decision, Refusal):
            return Refused(OVERLOADED, decision.retry_after_s, str(decision))
        return decision

    @property
    def bound(self) -> int:
        """Requests admitted at most now: ``max_in_flight`` plus the remote slots."""
        return self.max_in_flight + max(self.remote_slots(), 0)

    def leave(self) -> None:
        with self._lock:
            self.in_flight = max(self.in_flight - 1, 0)

    def drain(self) -> None:
        """Refuse every new request from now on."""
        self.draining = True


def refusal_body(reason: str, *, openai: bool = False, detail: str = "") -> bytes:
    """The refusal's JSON: the service's error shape, or OpenAI's (on its compatible routes)."""
    message = (
        "the server is shutting down; retry on another instance"
        if reason == SHUTTING_DOWN
        else "the server is at capacity; retry after the time in Retry-After"
    )
    if detail:
        message = f"{message} ({detail})"
    if openai:
        error = {"message": message, "type": "server_error", "param": None, "code": reason}
        return json.dumps({"error": error}).encode()
    return json.dumps({"error": {"type": reason, "message": message}}).encode()


class AdmissionMiddleware:
    """Admit the ``routes``' requests within ``admission``'s bound; refuse the rest at once (in
    OpenAI's error shape on ``openai_routes``)."""

    def __init__(
        self,
        app: ASGIApp,
        admission: Admission,
        routes: Iterable[str],
        openai_routes: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.admission = admission
        self.routes = frozenset(routes)
        self.openai_routes = frozenset(openai_routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = scope.get("state", {})
        if scope["type"] != "http" or scope["path"] not in self.routes or state.get(ADMITTED):
            await self.app(scope, receive, send)  # (admitted already, as it was parsed)
            return
        admission = self.admission
        reason = admission.try_enter()
        if reason is not None:
            await self._refuse(scope, send, Refused(reason, admission.retry_after_s))
            return
        try:
            if admission.finish is None:
                await self.app(scope, receive, send)
                return
            await self._admit_by_finish(scope, receive, send)
        finally:
            admission.leave()

    async def _admit_by_finish(self, scope: Scope, receive: Receive, send: Send) -> None:
        budget_ms, receive = await peek_budget(scope, receive, self.admission.default_budget_ms)
        arrived = scope.get("state", {}).get("arrived_at") or time.perf_counter()
        verdict = self.admission.decide(scope["path"], arrived=arrived, budget_ms=budget_ms)
        if isinstance(verdict, Refused):
            await self._refuse(scope, send, verdict)
            return
        await serve_admitted(self.app, verdict, scope, receive, send)

    async def _refuse(self, scope: Scope, send: Send, refused: Refused) -> None:
        openai = scope["path"] in self.openai_routes
        await send_refusal(
            scope, send, refused.reason, refused.retry_after_s, openai=openai, detail=refused.detail
        )


async def serve_admitted(
    app: ASGIApp, ticket: Ticket, scope: Scope, receive: Receive, send: Send
) -> None:
    """Serve an admitted request with its ticket held (its stages report to it); when its
    response ends the ticket is finished, learning from it only if it was a 200."""
    status = 500

    async def watch(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    token = hold(ticket)
    try:
        await app(scope, receive, watch)
    finally:
        release(token)
        ticket.finish(learn=status == 200)


def refusal_headers(body: bytes, retry_after_s: int) -> list[tuple[bytes, bytes]]:
    """A refusal's headers: its JSON body's type and length, and ``Retry-After``."""
    return [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", str(retry_after_s).encode()),
    ]


async def send_refusal(
    scope: Scope,
    send: Send,
    reason: str,
    retry_after_s: int,
    *,
    openai: bool = False,
    detail: str = "",
    close: bool = False,
) -> None:
    """Answer 503 ``reason`` with ``Retry-After``, counted in ``ragtime_admission_refused_total``
    (``close``: and ask the client to close the connection: this server is going away)."""
    body = refusal_body(reason, openai=openai, detail=detail)
    headers = refusal_headers(body, retry_after_s)
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
    count_refusal(scope["path"], reason, scope.get("state", {}))


def count_refusal(
    route: str, reason: str, state: Mapping[str, Any], sent_at: float | None = None
) -> None:
    """Count a refusal sent, just now or at ``sent_at`` (``ragtime_admission_refused_total``),
    and time it, from the request's arrival: when the kernel received its bytes
    (``received_at``) where the server's HTTP protocol measured it (``app.frontdoor.protocol``),
    else its budget's start (``arrived_at``); and, where stamped, from its read (``read_at``)."""
    metrics.ADMISSION_REFUSED.labels(route=route, reason=reason).inc()
    now = time.perf_counter() if sent_at is None else sent_at
    arrived = state.get("received_at", state.get("arrived_at"))
    if arrived is not None:
        metrics.ADMISSION_REFUSAL_SECONDS.observe(now - arrived)
    if "read_at" in state:
        metrics.ADMISSION_REFUSAL_AFTER_READ_SECONDS.observe(now - state["read_at"])


async def peek_budget(scope: Scope, receive: Receive, default_ms: float) -> tuple[float, Receive]:
    """The request's ``budget_ms`` from its JSON body when the body is small (declared at most
    ``PEEK_BYTES``) and the request carries a key (a request without one never has its body
    read: it gets its 401 first), else ``default_ms``; and a ``receive`` that replays what was
    read. A body that is not JSON, or has no valid ``budget_ms``, counts with the default: the
    route's own validation answers for it."""
    if not budget_readable(scope):
        return default_ms, receive
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

    return budget_in(body, default_ms), replay


def budget_readable(scope: Scope) -> bool:
    """Whether the request's budget is read from its body: it carries a key (a request
    without one never has its body read: it gets its 401 first) and declares a body of at
    most ``PEEK_BYTES``."""
    headers = dict(scope.get("headers") or [])
    declared = headers.get(b"content-length", b"")
    scheme = headers.get(b"authorization", b"").partition(b" ")[0].lower()
    return scheme == b"bearer" and declared.isdigit() and int(declared) <= PEEK_BYTES


def budget_in(body: bytes, default_ms: float) -> float:
    """The JSON body's positive integer ``budget_ms``, else ``default_ms`` (a body that is not
    JSON, or has no valid ``budget_ms``: the route's own validation answers for it)."""
    try:
        value = json.loads(body).get("budget_ms")
    except (ValueError, AttributeError, RecursionError):
        return default_ms
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return float(value)
    return default_ms
