"""Whether hybrid search's keyword side (BM25) is worth its predicted time: priced against what
that time buys in the plan after search, as the degradation policy prices every saving."""

from __future__ import annotations

from tracing.budget.engine import BudgetEngine
from tracing.budget.ledger import BudgetLedger
from tracing.budget.plan import Action
from tracing.budget.queue import TargetQueue
from tracing.budget.stage_names import StageName


def keyword_side(
    engine: BudgetEngine,
    ledger: BudgetLedger,
    target: str | None,
    queue: TargetQueue | None,
    *,
    k: int,
    rerank_available: bool,
) -> Action | None:
    """Whether hybrid search's keyword side runs: None when it does; else the action that
    drops it (``keyword_skipped``, a priced saving like the plan's): when the best plan
    after search keeps more quality without its predicted time (the ``keyword`` knob of the
    quality table at 0) than with it, or fits only without it. Nothing is dropped where
    nothing fits either way: the plan refuses then."""
    keyword_ms = engine.cost.predict(StageName.KEYWORD, 1)

    def quality(spend_first_ms: float) -> float | None:
        return engine.plan_quality(
            ledger,
            spend_first_ms=spend_first_ms,
            k=k,
            rerank_available=rerank_available,
            target=target,
            queue=queue,
        )

    table = engine.quality_for(target)
    dropped_share = table.quality("keyword", 0.0) * table.ceiling()
    if target is not None and engine.full_plan_fits(
        ledger, target, queue, k=k, rerank_available=rerank_available, spend_first_ms=keyword_ms
    ):
        # Where the full plan fits, the plan keeps at least its quality (or, for a first token
        # in time, that share of it): no plan need be weighed when that already beats any
        # plan without the side.
        least = table.plan_quality(context=1.0, output=1.0, rerank=1.0)
        least *= min(engine.answer_policy.limits.ttft_min_quality, 1.0)
        if least * table.quality("keyword", 1.0) >= dropped_share:
            return None
    with_side = quality(keyword_ms)
    kept_with = None if with_side is None else with_side * table.quality("keyword", 1.0)
    dropped = table.quality("keyword", 0.0)
    if kept_with is not None and kept_with >= dropped_share:
        return None  # no plan without it can keep more (a plan keeps at most the ceiling)
    without = quality(0.0)
    if without is None:
        return None
    kept = without * dropped
    if kept_with is not None and kept_with >= kept:
        return None
    if with_side is None:
        reason = (
            f"keyword search needs ~{keyword_ms:.1f} ms: the smallest plan fits only without it"
        )
    else:
        reason = (
            f"keyword search needs ~{keyword_ms:.1f} ms: the plan keeps {kept:.2f} of its "
            f"quality without it, {with_side:.2f} with it"
        )
    return Action(StageName.KEYWORD, "keyword_skipped", reason)
