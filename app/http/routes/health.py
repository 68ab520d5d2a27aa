"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from app.http.deps import ServicesDep, optional_key
from tracing import metrics_payload

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up and serving HTTP."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request, services: ServicesDep) -> JSONResponse:
    """Models and index loaded (200) or not (503); not ready once the server is stopping. What
    each part's state is (models, paths, collections) only for a valid API key with the
    ``admin`` scope: a probe without one, or a tenant's key, learns ready or not ready."""
    ready, components = services.readiness()
    if request.app.state.shutdown.begun:
        ready, components = False, {**components, "server": "shutting down"}
    body: dict[str, Any] = {"ready": ready}
    key = await optional_key(request, services)
    if key is not None and "admin" in key.scopes:
        body["components"] = components
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics")
async def metrics(request: Request, services: ServicesDep) -> Response:
    services.collection_states()  # ragtime_collection_broken as of this scrape
    body, content_type = metrics_payload(request.headers.get("accept", ""))
    return Response(body, media_type=content_type)
