"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from app.deps import ServicesDep
from tracing import metrics_payload

router = APIRouter(tags=["operations"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up and serving HTTP."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(services: ServicesDep) -> JSONResponse:
    """Models and index loaded (200), or what is missing (503)."""
    ready, components = services.readiness()
    return JSONResponse(
        {"ready": ready, "components": components}, status_code=200 if ready else 503
    )


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    body, content_type = metrics_payload(request.headers.get("accept", ""))
    return Response(body, media_type=content_type)
