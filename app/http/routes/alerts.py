"""``GET /v1/alerts``: the alerts firing now, from the in-process evaluator."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from app.http.deps import AdminKey
from tracing.alerts import AlertEvaluator

router = APIRouter(tags=["operations"])


async def get_alerts(request: Request) -> AlertEvaluator:
    evaluator: AlertEvaluator = request.app.state.alerts
    return evaluator


AlertsDep = Annotated[AlertEvaluator, Depends(get_alerts)]


@router.get("/v1/alerts")
async def alerts(key: AdminKey, evaluator: AlertsDep) -> dict[str, list[dict[str, Any]]]:
    """Firing alerts in Alertmanager's shape (labels, annotations, startsAt, ...) and value;
    needs the ``admin`` scope."""
    return {"alerts": evaluator.firing()}
