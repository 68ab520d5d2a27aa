"""The least a piece of work needs comes from the one cost model: a stage's calls on its threads,
a target's first token and rerank's time per pair, under its prior and fading, and drops age it."""

from __future__ import annotations

import random

import pytest

from tracing.budget import CostModel, GenerationPrior, StageName
from tracing.budget.observations import Ordered, weighted_quantile

PRIOR = GenerationPrior(fixed_ms=50.0, prefill_ms_per_token=2.0, decode_ms_per_token=10.0)
TARGET = "llama.cpp:model"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_stage_call_needs_nothing_before_any_was_seen() -> None:
    assert CostModel().quickest_call_ms(StageName.EMBED) == 0.0


def test_the_quickest_call_is_a_low_quantile_of_recent_calls() -> None:
    costs = CostModel(clock=Clock())
    costs.observe_call(StageName.EMBED, 300.0)
    assert costs.quickest_call_ms(StageName.EMBED) == 300.0  # one call stands on its own
    for ms in (*[80.0] * 20, 60.0, 40.0, 50.0):
        costs.observe_call(StageName.EMBED, ms)
    assert costs.quickest_call_ms(StageName.EMBED) == 40.0
    for _ in range(48):  # ... while the calls after it show it was an outlier long ago
        costs.observe_call(StageName.EMBED, 80.0)
    assert costs.quickest_call_ms(StageName.EMBED) == 80.0
    assert costs.quickest_call_ms(StageName.SEARCH) == 0.0  # per stage
    assert costs.snapshot()["quickest_call_ms"] == {"embed": 80.0, "search": 0.0}


def test_drops_age_slow_calls_until_a_call_is_never_judged_too_late() -> None:
    """A stall made every recent call slow; calls dropped on that figure teach nothing. Each
    drop ages what was learned, so that within a bounded number of drops the prior (nothing)
    stands and calls run again, and are timed again."""
    costs = CostModel(clock=Clock())
    for _ in range(64):
        costs.observe_call(StageName.RERANK, 2_000.0)
    drops = 0
    while costs.quickest_call_ms(StageName.RERANK) > 0.0:
        costs.observe_call_drop(StageName.RERANK)
        drops += 1
        assert drops <= 20
    assert drops >= 2  # one drop does not forget a stage's whole history
    costs.observe_call(StageName.RERANK, 30.0)
    assert costs.quickest_call_ms(StageName.RERANK) == 30.0


def test_the_least_first_token_lies_below_the_planned_one_and_grows_with_the_prompt() -> None:
    costs = CostModel(generation_prior=PRIOR, clock=Clock())
    cost = costs.generation(TARGET)
    for tokens, ms in ((100, 240.0), (100, 260.0), (300, 640.0), (300, 700.0), (200, 450.0)):
        cost.observe_first_token(tokens, ms)
    least_100 = costs.least_first_token_ms(TARGET, 100)
    assert 0.0 < least_100 <= cost.ttft_ms(100, 0.5) <= cost.ttft_ms(100)
    assert least_100 < 240.0  # at most the quickest seen at that length
    assert costs.least_first_token_ms(TARGET, 300) > least_100


def test_the_least_first_token_leaves_out_the_prefix_requests_find_cached() -> None:
    costs = CostModel(generation_prior=PRIOR, clock=Clock())
    cold = costs.least_first_token_ms(TARGET, 400)
    assert cold == pytest.approx(50.0 + 2.0 * 400)  # the prior's line, nothing cached
    for _ in range(5):
        costs.generation(TARGET).observe_cache(400, 300)
    assert costs.least_first_token_ms(TARGET, 400) == pytest.approx(50.0 + 2.0 * 100)


def test_drops_of_first_tokens_bring_the_prior_back() -> None:
    costs = CostModel(generation_prior=PRIOR, clock=Clock())
    for _ in range(3):
        costs.generation(TARGET).observe_first_token(100, 30_000.0)
    slow = costs.least_first_token_ms(TARGET, 100)
    assert slow > 5_000.0
    for _ in range(6):
        costs.observe_drop(TARGET)
    assert costs.least_first_token_ms(TARGET, 100) < slow / 2


def test_rerank_reads_its_time_per_pair_at_the_median_of_the_stage_cost() -> None:
    """Before anything is learned, the prior; two rounds that agree outweigh it."""
    costs = CostModel({StageName.RERANK: 4.0}, clock=Clock())
    assert costs.rate(StageName.RERANK, 0.5) == 4.0
    costs.observe(StageName.RERANK, 1_000.0, 2)
    assert costs.rate(StageName.RERANK, 0.5) == 4.0  # one round does not
    costs.observe(StageName.RERANK, 1_000.0, 2)
    assert costs.rate(StageName.RERANK, 0.5) == 500.0


def test_ordered_reads_every_quantile_as_weighted_quantile_does() -> None:
    """``Ordered`` keeps observations sorted once and places the prior without sorting again;
    each quantile it reads is the one ``weighted_quantile`` reads of them all."""
    rng = random.Random(1)
    for _ in range(3000):
        pairs = [
            (rng.choice([1.0, 2.0, rng.random() * 10]), rng.choice([0.5, 1.0, rng.random()]))
            for _ in range(rng.randint(0, 8))
        ]
        beside = (rng.choice([0.0, 2.0, rng.random() * 10]), rng.choice([1.0, rng.random() * 3]))
        q = rng.choice([0.05, 0.25, 0.5, 0.9, rng.random()])
        assert Ordered(pairs).quantile(q, beside) == weighted_quantile([*pairs, beside], q)
        if pairs:
            assert Ordered(pairs).quantile(q) == weighted_quantile(pairs, q)
