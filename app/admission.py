"""Admission control: how many question requests one process serves at once, and the rest.

A process that accepts every request collapses under overload: each admitted request slows every
other, until none finishes within its budget (issue 13, finding 2). ``AdmissionMiddleware`` (pure
ASGI, in front of routing, auth and the body) bounds the question routes' requests in flight to
``max_in_flight``, the work this process's own CPUs can carry, plus the decoding slots of the
remote generation servers that are serving now (``GenerationBackend.remote_slots``: a GPU server
that decodes 64 at once takes 64 more; a request waiting on it costs this process only a
connection). One past the bound is refused at once, before any of its work is done: 503
``overloaded`` with ``Retry-After``. From the moment the server is told to stop
(``drain_when_stopping``), every new question request is refused so (``shutting_down``), and the
live ones are let finish: a stream may run for ``shutdown_grace_s``, then it ends with an
``error`` event (``app.routes.ask``).

Refusals are deliberate, not failures: each is counted in ``ragtime_admission_refused_total``
(by route and reason), and the error-ratio alert takes them out of both sides of its ratio
(``deploy/prometheus/alerts.yml``, ``tracing/_alert_conditions.py``). The per-pool bound (how much
generation a target may have queued) is the budget engine's: ``BudgetEngine.admit``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable

from sse_starlette.sse import AppStatus
from starlette.types import ASGIApp, Receive, Scope, Send

from tracing import metrics

OVERLOADED = "overloaded"
SHUTTING_DOWN = "shutting_down"


class Admission:
    """The process's count of question requests in flight, its bound, and whether it drains."""

    def __init__(
        self,
        max_in_flight: int,
        *,
        retry_after_s: int,
        remote_slots: Callable[[], int] = lambda: 0,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.max_in_flight = max_in_flight
        self.retry_after_s = retry_after_s
        self.remote_slots = remote_slots
        """The remote generation servers' slots now (set once the backend is built)."""
        self.in_flight = 0
        self.draining = False
        self._idle = asyncio.Event()
        self._idle.set()

    def try_enter(self) -> str | None:
        """Take a place, or say why not (``overloaded``, ``shutting_down``)."""
        if self.draining:
            return SHUTTING_DOWN
        if self.in_flight >= self.bound:
            return OVERLOADED
        self.in_flight += 1
        self._idle.clear()
        return None

    @property
    def bound(self) -> int:
        """Requests admitted at most now: ``max_in_flight`` plus the remote slots."""
        return self.max_in_flight + max(self.remote_slots(), 0)

    def leave(self) -> None:
        self.in_flight -= 1
        if self.in_flight <= 0:
            self.in_flight = 0
            self._idle.set()

    def drain(self) -> None:
        """Refuse every new request from now on."""
        self.draining = True

    async def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no admitted request is left, at most ``timeout_s``; whether none is."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True


async def drain_when_stopping(admission: Admission, *, poll_s: float = 0.1) -> None:
    """Drain ``admission`` as soon as the server begins to stop (SIGTERM or SIGINT): uvicorn
    then waits for the open connections, and their new questions must be refused, while live
    streams run on for their grace period. sse_starlette records the signal in ``AppStatus``."""
    while not AppStatus.should_exit:
        await asyncio.sleep(poll_s)
    admission.drain()


def refusal_body(reason: str, *, openai: bool = False) -> bytes:
    """The refusal's JSON: the service's error shape, or OpenAI's (on its compatible routes)."""
    message = (
        "the server is shutting down; retry on another instance"
        if reason == SHUTTING_DOWN
        else "the server is at capacity; retry after the time in Retry-After"
    )
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
        if scope["type"] != "http" or scope["path"] not in self.routes:
            await self.app(scope, receive, send)
            return
        refused = self.admission.try_enter()
        if refused is None:
            try:
                await self.app(scope, receive, send)
            finally:
                self.admission.leave()
            return
        metrics.ADMISSION_REFUSED.labels(route=scope["path"], reason=refused).inc()
        body = refusal_body(refused, openai=scope["path"] in self.openai_routes)
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(self.admission.retry_after_s).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
