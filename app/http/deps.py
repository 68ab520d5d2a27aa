"""Dependencies that route signatures read like sentences: ``body: AskBody, key: CurrentKey``.

The front door, in order: a request's ledger counts from its arrival, on the default budget; the
key is checked (the ``auth`` stage) before a byte of the body is read; a question route then reads
its body, bounded, parses and validates it once (``app.http.body``), and only then sets the
request's budget (``app.http.limits.request_budget``). The auth stage is charged once that budget is
known, so its span carries the budget the request runs on, as every later stage's does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, TypeVar

from fastapi import Depends, Header, Request
from opentelemetry import trace
from opentelemetry.trace import Span

from app.frontdoor.gate import TICKET
from app.frontdoor.shutdown import Shutdown
from app.http.body import parse_body, read_body
from app.http.errors import Forbidden, KeyStoreDown, Unauthorized
from app.http.limits import TIMEOUT_HEADER, request_budget
from app.http.schemas import (
    AnswerRequest,
    AskRequest,
    BudgetedRequest,
    ChatCompletionRequest,
    SearchRequest,
)
from app.keys.auth import ApiKey, BaseKeyStore, KeyStoreUnavailable
from app.keys.ratelimit import RateLimiter
from app.pipeline import Pipeline
from app.pipeline.services import Services
from app.settings import Settings
from retrieval import UnknownCollection
from tracing import BudgetLedger
from tracing.budget import StageName

tracer = trace.get_tracer(__name__)


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_shutdown(request: Request) -> Shutdown:
    """The server's stop, which ends live answer streams at its grace."""
    shutdown: Shutdown = request.app.state.shutdown
    return shutdown


ShutdownDep = Annotated[Shutdown, Depends(get_shutdown)]


async def get_app_settings(services: ServicesDep) -> Settings:
    """The settings the running app was built with (``config.get_settings`` reads the env)."""
    return services.settings


SettingsDep = Annotated[Settings, Depends(get_app_settings)]


async def get_pipeline(request: Request) -> Pipeline:
    pipeline: Pipeline = request.app.state.pipeline
    return pipeline


PipelineDep = Annotated[Pipeline, Depends(get_pipeline)]


async def get_ledger(request: Request, settings: SettingsDep) -> BudgetLedger:
    """The request's ledger, counting from the moment the request arrived (before auth, as the
    front door stamped it: ``app.frontdoor.gate``), on the default budget until a question route
    reads the request's own (``question_body``)."""
    state = request.state
    arrived: float = state.arrived_at
    read_at = getattr(state, "read_at", None)
    if read_at is not None:
        # Before its first stage: how long the request waited in the kernel before its read
        # (``app.frontdoor.socket_wait``), counted in its budget (``app.frontdoor.gate``).
        trace.get_current_span().set_attribute(
            "ragtime.request.socket_wait_ms", round((read_at - arrived) * 1000.0, 3)
        )
    return BudgetLedger(
        settings.budget_ms_default,
        started_at=arrived,
        shares=settings.budget_shares,
        ticket=getattr(state, TICKET, None),
    )


LedgerDep = Annotated[BudgetLedger, Depends(get_ledger)]


class AuthStage:
    """The ``auth`` stage, which runs before the request's budget is known.

    ``run()`` times the key check in the stage's span; ``settle()`` charges that time to the
    ledger, with the budget the ledger has by then, and ends the span at the time the check ended.
    """

    def __init__(self, ledger: BudgetLedger) -> None:
        self.ledger = ledger
        self._span: Span | None = None
        self._elapsed_ms = 0.0
        self._started: float | None = None
        self._ended_ns: int | None = None

    @contextmanager
    def checking(self) -> Iterator[Span]:
        """The check, in the stage's span made current; an exception marks the span failed."""
        span = self._span = tracer.start_span(StageName.AUTH)
        started = self._started = time.perf_counter()
        try:
            with trace.use_span(span, end_on_exit=False):
                yield span
        finally:
            self._elapsed_ms = (time.perf_counter() - started) * 1000.0
            self._ended_ns = time.time_ns()

    def settle(self) -> None:
        """Charge the stage to the ledger and end its span; idempotent."""
        span, self._span = self._span, None
        if span is not None:
            self.ledger.charge(StageName.AUTH, self._elapsed_ms, span, started=self._started)
            span.end(end_time=self._ended_ns)


async def get_auth_stage(ledger: LedgerDep) -> AsyncIterator[AuthStage]:
    """The request's auth stage, settled when its budget is set or else when the route is done
    (a route without a body, a request refused before its budget was read)."""
    stage = AuthStage(ledger)
    try:
        yield stage
    finally:
        stage.settle()


AuthStageDep = Annotated[AuthStage, Depends(get_auth_stage, scope="function")]


async def get_rate_limiter(request: Request) -> RateLimiter:
    limiter: RateLimiter = request.app.state.rate_limiter
    return limiter


RateLimiterDep = Annotated[RateLimiter, Depends(get_rate_limiter)]


async def verify_key(keys: BaseKeyStore, secret: str) -> ApiKey | None:
    """The key whose secret this is: at once when the store can answer without waiting (a
    local SQLite lookup), else from a worker thread (a database call, under the store's lock)."""
    answered, key = keys.try_verify(secret)
    if answered:
        return key
    return await asyncio.to_thread(keys.verify, secret)


async def authenticate(
    request: Request, services: ServicesDep, stage: AuthStageDep, limiter: RateLimiterDep
) -> ApiKey:
    """The ``auth`` stage: a valid ``Authorization: Bearer <key>`` or 401; then the key's rate
    limit (429). Neither the key nor its name goes on the span or into an error: its id only."""
    with stage.checking() as span:
        header = request.headers.get("authorization")
        if not header:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise Unauthorized("malformed Authorization header: expected 'Bearer <key>'")
        try:
            key = await verify_key(services.keys, secret.strip())
        except KeyStoreUnavailable as exc:
            raise KeyStoreDown(str(exc)) from exc
        if key is None:
            raise Unauthorized("invalid or revoked API key")
        span.set_attribute("ragtime.auth.key_id", key.id)
        await limiter.acquire(key.id)
        return key


CurrentKey = Annotated[ApiKey, Depends(authenticate)]


def require_scope(key: ApiKey, scope: str) -> ApiKey:
    """``key``, if it has ``scope``; else 403."""
    if scope not in key.scopes:
        raise Forbidden(scope)
    return key


def scoped(scope: str) -> Callable[..., Awaitable[ApiKey]]:
    """The dependency of a route that needs ``scope``: the request's key, or 401/429/403."""

    async def check(key: CurrentKey) -> ApiKey:
        return require_scope(key, scope)

    return check


AskKey = Annotated[ApiKey, Depends(scoped("ask"))]
IngestKey = Annotated[ApiKey, Depends(scoped("ingest"))]
AdminKey = Annotated[ApiKey, Depends(scoped("admin"))]


def readable_collection(key: ApiKey, collection: str) -> str:
    """``collection``, if ``key`` may read it; else the 404 of an unknown collection, word for
    word, so that a key learns nothing of the collections of others."""
    if not key.may_read(collection):
        raise UnknownCollection(f"unknown collection {collection!r}")
    return collection


async def optional_key(request: Request, services: Services) -> ApiKey | None:
    """The valid key of ``Authorization: Bearer <key>``, or None (no header, or not valid)."""
    scheme, _, secret = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        return None
    try:
        return await verify_key(services.keys, secret.strip())
    except KeyStoreUnavailable:
        return None


Body = TypeVar("Body", bound=BudgetedRequest)


def question_body(model: type[Body], scope: str = "ask") -> Callable[..., Awaitable[Body]]:
    """The dependency that reads a question route's body as ``model``, after the key check (and
    its ``scope``: 403), and then sets the request's budget on its ledger."""

    async def read(
        request: Request,
        key: CurrentKey,  # checked before the body is read
        settings: SettingsDep,
        ledger: LedgerDep,
        auth: AuthStageDep,
        timeout_ms: Annotated[
            str | None,
            Header(
                alias=TIMEOUT_HEADER, description="The request's budget (ms) if the body has none."
            ),
        ] = None,
    ) -> Body:
        require_scope(key, scope)
        body = await parse_body(model, await read_body(request, settings.max_body_bytes))
        ledger.budget_ms = float(request_budget(body.budget_ms, timeout_ms, settings))
        if isinstance(body, AnswerRequest) and body.ttft_target_ms is not None:
            ledger.ttft_target_ms = float(body.ttft_target_ms)
        auth.settle()
        return body

    return read


AskBody = Annotated[AskRequest, Depends(question_body(AskRequest))]
SearchBody = Annotated[SearchRequest, Depends(question_body(SearchRequest))]
ChatBody = Annotated[ChatCompletionRequest, Depends(question_body(ChatCompletionRequest))]
