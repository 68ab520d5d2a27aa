"""Admission control: a bound on the answer and search requests in flight in this process.

Past the bound a request is refused at once, before auth or any work, with a 503 and
``Retry-After``: queueing it would only make it, and every request behind it, late (a
congestion collapse: past their budgets, all of them). Refusals are counted by route in
``ragtime_admission_refused_total``. Requests admitted are served by the pipeline, whose budget
engine refuses those that cannot meet their deadline before they cost model time.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import error_body
from tracing import metrics


class AdmissionMiddleware:
    """Admit at most ``max_in_flight`` requests to ``routes`` at once (a streamed answer counts
    until its last event); refuse the rest with 503 and ``Retry-After: retry_after_s``."""

    def __init__(
        self, app: ASGIApp, *, routes: frozenset[str], max_in_flight: int, retry_after_s: int
    ) -> None:
        self.app = app
        self.routes = routes
        self.max_in_flight = max_in_flight
        self.retry_after_s = retry_after_s
        self.in_flight = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in self.routes:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.max_in_flight:
            metrics.ADMISSION_REFUSED.labels(route=scope["path"]).inc()
            await self._refuse(send)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1

    async def _refuse(self, send: Send) -> None:
        message = (
            f"the server is at its limit of {self.max_in_flight} requests in flight; "
            f"retry after {self.retry_after_s} s"
        )
        body = json.dumps(error_body("overloaded", message)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 503,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(self.retry_after_s).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
