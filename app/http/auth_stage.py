"""The ``auth`` stage: the request's key checked (``Authorization: Bearer <key>``), then the
key's rate limit, run through the request's budget session like every stage
(``BudgetSession.run``). It runs before the body is read, so before the request's own budget is
known: its span waits for it (``BudgetLedger.set_budget``) and carries it, as every later
stage's does. Neither the key nor its name goes on the span or into an error: its id only."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.trace import Span
from starlette.requests import Request

from app.http.errors import KeyStoreDown, Unauthorized
from app.keys.auth import ApiKey, BaseKeyStore, KeyStoreUnavailable
from app.keys.ratelimit import RateLimiter
from tracing.budget import Allowance, StageName


@dataclass(frozen=True)
class Authenticated:
    """The request's key, checked and within its rate limit."""

    key: ApiKey
    units: float = 0.0
    """Auth's cost is not learned: no plan counts it (the front door's own pace does)."""

    def record(self, span: Span) -> None:
        """The key's id went on the span as it was found (a 429 carries it too)."""


class Authenticate:
    """The ``auth`` stage over the service's key store and rate limiter."""

    name = StageName.AUTH

    def __init__(self, keys: BaseKeyStore, limiter: RateLimiter) -> None:
        self.keys = keys
        self.limiter = limiter

    async def run(self, request: Request, allowance: Allowance) -> Authenticated:
        """A valid key or 401 (503 when the key store is down); then its rate limit (429)."""
        header = request.headers.get("authorization")
        if not header:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise Unauthorized("malformed Authorization header: expected 'Bearer <key>'")
        try:
            key = await verify_key(self.keys, secret.strip())
        except KeyStoreUnavailable as exc:
            raise KeyStoreDown(str(exc)) from exc
        if key is None:
            raise Unauthorized("invalid or revoked API key")
        trace.get_current_span().set_attribute("ragtime.auth.key_id", key.id)
        await self.limiter.acquire(key.id)
        return Authenticated(key)


async def verify_key(keys: BaseKeyStore, secret: str) -> ApiKey | None:
    """The key whose secret this is: at once when the store can answer without waiting (a
    local SQLite lookup), else from a worker thread (a database call, under the store's lock)."""
    answered, key = keys.try_verify(secret)
    if answered:
        return key
    return await asyncio.to_thread(keys.verify, secret)
