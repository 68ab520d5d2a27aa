"""Dependencies that route signatures read like sentences: ``body: AskBody, key: CurrentKey``.

The front door, in order: a request's ledger counts from its arrival, on the default budget; the
key is checked (the ``auth`` stage) before a byte of the body is read; a question route then reads
its body, bounded, parses and validates it once (``app.http.body``), and only then sets the
request's budget (``app.http.limits.request_budget``). The auth stage is charged once that budget is
known (``BudgetLedger.set_budget``), so its span carries the budget the request runs on, as
every later stage's does. The request's budget session (``SessionDep``) is opened as it arrives:
its auth stage runs through it (``app.http.auth_stage``), then its pipeline.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import Depends, Header, Request
from opentelemetry import trace

from app.frontdoor.gate import TICKET
from app.frontdoor.shutdown import Shutdown
from app.http.auth_stage import Authenticate, verify_key
from app.http.body import parse_body, read_body
from app.http.errors import Forbidden
from app.http.limits import TIMEOUT_HEADER, request_budget
from app.http.schemas import (
    AnswerRequest,
    AskRequest,
    BudgetedRequest,
    ChatCompletionRequest,
    SearchRequest,
)
from app.keys.auth import ApiKey, KeyStoreUnavailable
from app.keys.ratelimit import RateLimiter
from app.pipeline import Pipeline
from app.pipeline.services import Services
from app.settings import Settings
from retrieval import UnknownCollection
from tracing import BudgetLedger
from tracing.budget import BudgetEngine, BudgetSession


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


async def get_ledger(request: Request, settings: SettingsDep) -> AsyncIterator[BudgetLedger]:
    """The request's ledger, counting from the moment the request arrived (before auth, as the
    front door stamped it: ``app.frontdoor.gate``), its budget pending until a question route
    reads the request's own (``question_body``); a route without a body, or a request refused
    before its budget was read, keeps the default, set as the route returns."""
    state = request.state
    arrived: float = state.arrived_at
    read_at = getattr(state, "read_at", None)
    if read_at is not None:
        # Before its first stage: how long the request waited in the kernel before its read
        # (``app.frontdoor.socket_wait``), counted in its budget (``app.frontdoor.gate``).
        trace.get_current_span().set_attribute(
            "ragtime.request.socket_wait_ms", round((read_at - arrived) * 1000.0, 3)
        )
    ledger = BudgetLedger(
        settings.budget_ms_default,
        started_at=arrived,
        ticket=getattr(state, TICKET, None),
        budget_pending=True,
    )
    try:
        yield ledger
    finally:
        ledger.set_budget()  # the default, where no body gave one (a no-op where one did)


LedgerDep = Annotated[BudgetLedger, Depends(get_ledger, scope="function")]


async def get_rate_limiter(request: Request) -> RateLimiter:
    limiter: RateLimiter = request.app.state.rate_limiter
    return limiter


RateLimiterDep = Annotated[RateLimiter, Depends(get_rate_limiter)]


async def get_session(request: Request, ledger: LedgerDep) -> BudgetSession:
    """The request's budget session, from its arrival: its auth stage runs through it, then
    its pipeline (``app.pipeline``), once the route has read what it asks."""
    engine: BudgetEngine = request.app.state.budget
    return BudgetSession(engine, ledger, route=request.scope["route"].path)


SessionDep = Annotated[BudgetSession, Depends(get_session)]


async def authenticate(
    session: SessionDep, request: Request, services: ServicesDep, limiter: RateLimiterDep
) -> ApiKey:
    """The ``auth`` stage (``app.http.auth_stage``), through the request's budget session:
    its key, or 401, 503 or 429."""
    checked = await session.run(Authenticate(services.keys, limiter), request)
    return checked.key


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
        timeout_ms: Annotated[
            str | None,
            Header(
                alias=TIMEOUT_HEADER, description="The request's budget (ms) if the body has none."
            ),
        ] = None,
    ) -> Body:
        require_scope(key, scope)
        body = await parse_body(model, await read_body(request, settings.max_body_bytes))
        if isinstance(body, AnswerRequest) and body.ttft_target_ms is not None:
            ledger.ttft_target_ms = float(body.ttft_target_ms)
        ledger.set_budget(float(request_budget(body.budget_ms, timeout_ms, settings)))
        return body

    return read


AskBody = Annotated[AskRequest, Depends(question_body(AskRequest))]
SearchBody = Annotated[SearchRequest, Depends(question_body(SearchRequest))]
ChatBody = Annotated[ChatCompletionRequest, Depends(question_body(ChatCompletionRequest))]
