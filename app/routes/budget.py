"""``GET /v1/budget/model``: what the budget engine currently believes each stage costs."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from app.deps import AdminKey, PipelineDep

router = APIRouter(tags=["operations"])


@router.get("/v1/budget/model")
async def budget_model(key: AdminKey, pipeline: PipelineDep) -> dict[str, Any]:
    """Per stage ms per unit, per generation target its fitted fixed cost, prefill and decode
    rates (median and at the planning quantile), observation counts and prior (from our CPU or
    from the target's calibration probe), calibration failures, and the quality table."""
    engine = pipeline.budget
    engine.publish()
    return engine.snapshot()
