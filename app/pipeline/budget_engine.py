"""The budget engine for the service's settings: plan limits, learning, rules, quality table; and
the process's one cost model, which the engine, the stages' threads and the local generation
backend share (``cost_model``)."""

from __future__ import annotations

from collections.abc import Callable

from app.settings import Settings
from tracing.budget import (
    DEFAULT_QUALITY_PATH,
    BudgetEngine,
    CostModel,
    Learning,
    PlanLimits,
    QualityTable,
    Rules,
)

#: How long an estimate the planner read stands though observations came since: every request
#: teaches the cost model each of its stages, and each reading after an observation works the
#: estimate out afresh (its observations weighed and put in order), which was a third of the
#: budget machinery's cost per request (issue 60 §2). A busy process works each out at most
#: 20 times a second; a plan reads figures at most 50 ms old, against budgets of seconds.
ESTIMATE_REFRESH_S = 0.05


def cost_model(settings: Settings) -> CostModel:
    """A process's cost model, learning as ``settings`` say."""
    return CostModel(
        learning=Learning(
            quantile=settings.budget_quantile,
            halflife_requests=settings.budget_halflife_requests,
            halflife_s=settings.budget_halflife_s,
            refresh_s=ESTIMATE_REFRESH_S,
        )
    )


def build_budget_engine(
    settings: Settings, costs: CostModel, *, loop_lag_ms: Callable[[], float] = lambda: 0.0
) -> BudgetEngine:
    """The budget engine for ``settings``, over ``costs``: the process's cost model, which the
    caller (the composition root, ``app.main.create_app``) holds; ``loop_lag_ms``: the serving
    event loop's recent lag, where one serves."""
    s = settings
    return BudgetEngine(
        PlanLimits(
            rerank_candidates=s.rerank_candidates,
            context_tokens=s.context_tokens,
            max_output_tokens=s.max_output_tokens,
            min_context_tokens=min(s.min_context_tokens, s.context_tokens),
            min_output_tokens=min(s.min_output_tokens, s.max_output_tokens),
            prune=s.context_pruning,
            ttft_target_ms=s.ttft_target_ms or None,
            ttft_min_quality=s.ttft_min_quality,
        ),
        PlanLimits(
            rerank_candidates=s.rerank_candidates,
            context_tokens=0,
            max_output_tokens=0,
            min_context_tokens=0,
            min_output_tokens=0,
            prompt_overhead_tokens=0,
            reserve_ms=2.0,
        ),
        quality=QualityTable.load(s.budget_quality_path or DEFAULT_QUALITY_PATH),
        cost=costs,
        rules=Rules(
            degrade=s.degradation_policy,
            on_infeasible=s.on_infeasible,
            max_queued_per_slot=s.max_queued_per_slot,
        ),
        loop_lag_ms=loop_lag_ms,
    )
