"""The cost model learns per-unit costs; the policy picks the largest plan that fits."""

from __future__ import annotations

import pytest

from tracing.cost_model import CostModel
from tracing.policy import BudgetInfeasible, DegradationPolicy, PlanLimits

RATES = {"rerank": 10.0, "prefill": 1.0, "decode": 10.0, "service": 500.0}
LIMITS = PlanLimits(
    rerank_candidates=20,
    context_tokens=800,
    max_output_tokens=100,
    min_context_tokens=100,
    min_output_tokens=10,
    prompt_overhead_tokens=100,
    reserve_ms=0.0,
)
# Full plan: rerank 20 x 10 + prefill (800 + 100) x 1 + decode 100 x 10 = 2100 ms.


def policy() -> DegradationPolicy:
    cost = CostModel({})
    cost.seed(RATES)
    return DegradationPolicy(cost, LIMITS)


def test_rates_are_moving_averages_of_per_unit_costs() -> None:
    cost = CostModel({"decode": 10.0}, alpha=0.5)
    cost.observe("decode", 400.0, 20)  # 20 ms per token
    assert cost.rate("decode") == pytest.approx(15.0)
    cost.observe("decode", 400.0, 20)
    assert cost.rate("decode") == pytest.approx(17.5)
    assert cost.predict("decode", 10) == pytest.approx(175.0)
    cost.observe("search", 3.0, 1)  # a stage without a prior starts from its first run
    assert cost.rate("search") == 3.0
    cost.observe("search", 5.0, 0)  # no work done: nothing learned
    assert cost.snapshot()["search"] == {"ms_per_unit": 3.0, "observations": 1}


def test_the_full_plan_when_it_fits() -> None:
    plan = policy().plan(2100, k=4, rerank_available=True)
    assert (plan.rerank_candidates, plan.context_tokens, plan.max_output_tokens) == (20, 800, 100)
    assert plan.actions == [] and plan.predicted_ms == pytest.approx(2100)


def test_fewer_rerank_candidates_first() -> None:
    plan = policy().plan(2000, k=4, rerank_available=True)
    assert plan.rerank_candidates == 10
    assert [a.action for a in plan.actions] == ["rerank_reduced"]
    assert plan.predicted_ms <= 2000


def test_rerank_is_skipped_when_not_even_k_candidates_fit() -> None:
    plan = policy().plan(1930, k=4, rerank_available=True)
    assert plan.rerank_candidates == 0 and plan.context_tokens == 800
    assert [a.action for a in plan.actions] == ["rerank_skipped"]


def test_then_a_smaller_context() -> None:
    plan = policy().plan(1700, k=4, rerank_available=True)
    assert plan.rerank_candidates == 0
    assert plan.context_tokens == 600 and plan.max_output_tokens == 100
    assert [a.action for a in plan.actions] == ["rerank_skipped", "context_reduced"]


def test_then_fewer_output_tokens() -> None:
    plan = policy().plan(1000, k=4, rerank_available=False)
    # Context halves to 400 first (prefill 500), then output shrinks to fit: 50 tokens.
    assert plan.context_tokens == 400 and plan.max_output_tokens == 50
    assert [a.action for a in plan.actions] == ["context_reduced", "output_capped"]


def test_then_the_rest_of_the_context() -> None:
    plan = policy().plan(350, k=4, rerank_available=False)
    assert plan.max_output_tokens == 10
    assert plan.context_tokens == 150  # 350 - 10 x 10 decode - 100 overhead
    assert plan.predicted_ms <= 350


def test_no_plan_fits_raises_with_the_numbers() -> None:
    with pytest.raises(BudgetInfeasible, match="needs about 300 ms and 250 ms remain") as caught:
        policy().plan(250, k=4, rerank_available=True)
    assert caught.value.needed_ms == pytest.approx(300)


def test_requests_queued_ahead_come_off_the_top() -> None:
    # 2 queued x 500 ms of service leave 1100 of 2100 ms: no rerank, half the context (prefill
    # 400 + 100), then 60 output tokens (600 ms); the wait counts in the prediction.
    plan = policy().plan(2100, k=4, rerank_available=True, queued=2)
    assert (plan.rerank_candidates, plan.context_tokens, plan.max_output_tokens) == (0, 400, 60)
    assert plan.predicted_ms == pytest.approx(2100)
    with pytest.raises(BudgetInfeasible):
        policy().plan(2100, k=4, rerank_available=True, queued=5)
