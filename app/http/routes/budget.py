"""``GET /v1/budget/model``: what the budget engine currently believes each stage costs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from app.http.deps import AdminKey
from tracing.budget import BudgetEngine

router = APIRouter(tags=["operations"])


@router.get("/v1/budget/model")
async def budget_model(key: AdminKey, request: Request) -> dict[str, Any]:
    """Per stage ms per unit, per generation target its fitted fixed cost, prefill and decode
    rates (median and at the planning quantile), observation counts and prior (from our CPU or
    from the target's calibration probe), calibration failures, the quality table, and what
    admission predicts a request's own work with (``admission``)."""
    engine: BudgetEngine = request.app.state.budget
    engine.publish()
    snapshot = engine.snapshot()
    finish = request.app.state.admission.finish
    if finish is not None:
        snapshot["admission"] = finish.snapshot()
    return snapshot
