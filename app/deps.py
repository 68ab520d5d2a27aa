"""Dependencies that route signatures read like sentences: ``key: CurrentKey``."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated

from fastapi import Depends, Request

from app.auth import ApiKey
from app.config import Settings
from app.errors import Unauthorized
from app.pipeline import Pipeline
from app.services import Services
from tracing import BudgetLedger


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_app_settings(services: ServicesDep) -> Settings:
    """The settings the running app was built with (``config.get_settings`` reads the env)."""
    return services.settings


SettingsDep = Annotated[Settings, Depends(get_app_settings)]


async def get_pipeline(request: Request) -> Pipeline:
    pipeline: Pipeline = request.app.state.pipeline
    return pipeline


PipelineDep = Annotated[Pipeline, Depends(get_pipeline)]


async def _requested_budget(request: Request) -> int | None:
    """``budget_ms`` from the JSON body if it is a plain int, read before auth (None if not).

    Starlette caches the body, so the route's own parsing reads it again for free; a malformed
    body or value is left for validation to report.
    """
    try:
        payload = json.loads(await request.body())
    except ValueError:
        return None
    value = payload.get("budget_ms") if isinstance(payload, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _header_budget(request: Request, settings: Settings) -> int | None:
    """``Request-Timeout-Ms``, clamped to the allowed range (proxies set it for every route)."""
    raw = request.headers.get("request-timeout-ms")
    if raw is None or not raw.strip().isdigit():
        return None
    return min(max(int(raw), settings.budget_ms_min), settings.budget_ms_max)


async def get_ledger(request: Request, settings: SettingsDep) -> BudgetLedger:
    """The request's ledger, counting from the moment the request arrived (before auth).

    Its budget: ``budget_ms`` from the body when in range (the route answers 422 when it is
    not), else the ``Request-Timeout-Ms`` header clamped to the range, else the default.
    """
    arrived = getattr(request.state, "arrived_at", None) or time.perf_counter()
    budget = await _requested_budget(request)
    if budget is None or not settings.budget_ms_min <= budget <= settings.budget_ms_max:
        budget = _header_budget(request, settings) or settings.budget_ms_default
    return BudgetLedger(budget, started_at=arrived, shares=settings.budget_shares)


LedgerDep = Annotated[BudgetLedger, Depends(get_ledger)]


async def authenticate(request: Request, services: ServicesDep, ledger: LedgerDep) -> ApiKey:
    """The ``auth`` stage: a valid ``Authorization: Bearer <key>`` or 401."""
    with ledger.stage("auth") as span:
        header = request.headers.get("authorization")
        if not header:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer" or not secret.strip():
            raise Unauthorized("malformed Authorization header: expected 'Bearer <key>'")
        # SQLite, under the key store's lock: off the event loop.
        key = await asyncio.to_thread(services.keys.verify, secret.strip())
        if key is None:
            raise Unauthorized("invalid or revoked API key")
        span.set_attribute("ragtime.auth.key_id", key.id)
        return key


CurrentKey = Annotated[ApiKey, Depends(authenticate)]
