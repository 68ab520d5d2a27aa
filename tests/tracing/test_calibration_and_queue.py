"""Calibration measures a target's costs; reservations model the queue in front of it."""

from __future__ import annotations

import time

import pytest

from tracing.budget import (
    BudgetInfeasible,
    Calibrator,
    CostModel,
    Probe,
    ProbeResult,
    Reservations,
    TargetQueue,
    calibrate,
)


def gpu_probe(calls: list[tuple[int, int]]) -> Probe:
    """A target that answers like a GPU server: TTFT 30 ms + 0.05 ms per token, 10 ms per token."""

    async def probe(prompt_tokens: int, max_tokens: int) -> ProbeResult:
        calls.append((prompt_tokens, max_tokens))
        ttft = 30.0 + 0.05 * prompt_tokens
        return ProbeResult(prompt_tokens, 0, ttft, max_tokens, ttft + 10.0 * (max_tokens - 1))

    return probe


async def test_calibration_measures_fixed_prefill_and_decode() -> None:
    calls: list[tuple[int, int]] = []
    prior = await calibrate(gpu_probe(calls))
    assert prior.source == "calibration"
    assert prior.fixed_ms == pytest.approx(30.4)
    assert prior.prefill_ms_per_token == pytest.approx(0.05, rel=0.01)
    assert prior.decode_ms_per_token == pytest.approx(10.0)
    assert len(calls) == 3


async def test_a_target_is_calibrated_when_it_joins_and_again_when_it_comes_back() -> None:
    cost = CostModel()
    calibrator = Calibrator(cost)
    calls: list[tuple[int, int]] = []
    probe = gpu_probe(calls)
    await calibrator.sync({"http://a": probe})
    assert cost.generation("http://a").ttft_ms(800) < 100  # not the CPU's 2.5 ms per token
    await calibrator.sync({"http://a": probe})
    assert len(calls) == 3  # still up: not probed again
    await calibrator.sync({})  # went down
    await calibrator.sync({"http://a": probe})
    assert len(calls) == 6


async def test_a_failed_probe_leaves_the_prior_and_is_retried() -> None:
    cost = CostModel()
    calibrator = Calibrator(cost)

    async def broken(prompt_tokens: int, max_tokens: int) -> ProbeResult:
        raise ConnectionError("refused")

    await calibrator.sync({"http://b": broken})
    assert "refused" in calibrator.failures["http://b"]
    assert cost.generation("http://b").prior.source == "prior"
    calls: list[tuple[int, int]] = []
    await calibrator.sync({"http://b": gpu_probe(calls)})
    assert calls and "http://b" not in calibrator.failures


async def test_reported_inter_token_latency_feeds_decode() -> None:
    cost = CostModel()
    calibrator = Calibrator(cost)
    calls: list[tuple[int, int]] = []
    for _ in range(30):
        await calibrator.sync({"t": gpu_probe(calls)}, lambda target: 40.0)
    assert cost.generation("t").decode_ms_per_token(0.5) == pytest.approx(40.0)


def test_a_lone_request_waits_for_nothing() -> None:
    book = Reservations()
    now = time.perf_counter()
    assert book.wait("t", now + 5, slots=1, now=now).ms == 0.0


def test_the_wait_is_the_work_ahead_capped_by_its_deadlines() -> None:
    book = Reservations()
    now = time.perf_counter()
    first = book.reserve("t", now + 10, 2000.0)
    first.start()
    book.reserve("t", now + 10, 1000.0)
    wait = book.wait("t", now + 20, slots=1, now=now)
    assert wait.ahead == 2 and wait.ms == pytest.approx(3000.0, abs=20)
    short = Reservations()
    short.reserve("t", now + 0.5, 2000.0)  # stopped at its deadline, 500 ms from now
    assert short.wait("t", now + 20, slots=1, now=now).ms == pytest.approx(500.0)


def test_earliest_deadline_first_counts_only_earlier_deadlines() -> None:
    book = Reservations()
    now = time.perf_counter()
    running = book.reserve("t", now + 30, 1000.0)
    running.start()
    book.reserve("t", now + 30, 1000.0)  # queued, due later than the newcomer
    assert book.wait("t", now + 5, slots=1, edf=True, now=now).ms == pytest.approx(1000.0, abs=20)
    assert book.wait("t", now + 5, slots=1, edf=False, now=now).ms == pytest.approx(2000.0, abs=20)


def test_a_batch_has_room_until_its_slots_are_full() -> None:
    book = Reservations()
    now = time.perf_counter()
    for _ in range(7):
        book.reserve("t", now + 10, 800.0).start()
    assert book.wait("t", now + 10, slots=8, now=now).ms == 0.0
    book.reserve("t", now + 10, 800.0).start()
    assert book.wait("t", now + 10, slots=8, now=now).ms == pytest.approx(800.0, abs=20)
    assert book.wait("t", now + 10, slots=8, external=8, external_ms=800.0, now=now).ms > 1000


def test_released_and_abandoned_reservations_hold_nothing() -> None:
    book = Reservations()
    now = time.perf_counter()
    res = book.reserve("t", now + 10, 5000.0)
    res.release()
    book.reserve("t", now - 5, 5000.0)  # its owner went away long ago
    assert book.wait("t", now + 10, slots=1, now=now).ms == 0.0
    assert book.open("t") == 0


def test_abandoned_reservations_cannot_fill_a_targets_queue() -> None:
    """Counted by ``open`` (admission's check) before any ``wait`` prunes them, reservations
    whose owners went away (a client gone before its stream began) refused every later request
    for good once they reached the queue's limit."""
    book = Reservations()
    now = time.perf_counter()
    for _ in range(3):
        book.reserve("t", now - 5, 5000.0)
    live = book.reserve("t", now + 10, 5000.0)
    assert book.open("t", now=now) == 1
    live.release()
    assert book.open("t", now=now) == 0


def test_refusals_bring_a_pessimistic_model_back_within_a_bounded_number_of_requests() -> None:
    """After a slow period the model predicts 10x the truth; each refusal counts as one
    observation of the prior, so requests run again after a bounded number of refusals."""
    from tracing.budget import BudgetEngine, BudgetLedger, PlanLimits, QualityTable

    engine = BudgetEngine(
        PlanLimits(0, 256, 32, min_context_tokens=64, min_output_tokens=8),
        PlanLimits(0, 0, 0, 0, 0, 0),
        quality=QualityTable({}),
        cost=CostModel(),
    )
    gen = engine.cost.generation("t")  # prior: 60 ms + 2.5 ms per token, 12 ms per token
    for _ in range(40):  # a slow period: ten times that
        gen.observe_first_token(300, 10 * (60 + 2.5 * 300))
        gen.observe_decode(30, 10 * 12 * 30)
    refused = 0
    while True:
        ledger = BudgetLedger(1500)  # the smallest plan fits at the prior's costs
        try:
            engine.plan_answer(ledger, k=4, rerank_available=False, target="t")
            break
        except BudgetInfeasible:
            refused += 1
            assert refused < 40, "locked out"
    assert 0 < refused <= 20


def test_a_refusal_for_the_queue_teaches_nothing() -> None:
    from tracing.budget import BudgetEngine, BudgetLedger, PlanLimits, QualityTable

    engine = BudgetEngine(
        PlanLimits(0, 256, 32, min_context_tokens=64, min_output_tokens=8),
        PlanLimits(0, 0, 0, 0, 0, 0),
        quality=QualityTable({}),
        cost=CostModel(),
    )
    now = time.perf_counter()
    engine.reservations.reserve("t", now + 60, 50_000.0).start()  # two long requests ahead
    engine.reservations.reserve("t", now + 60, 50_000.0)
    before = engine.cost.generation("t").estimate()
    with pytest.raises(BudgetInfeasible):
        engine.plan_answer(BudgetLedger(1500), k=4, rerank_available=False, target="t")
    assert engine.cost.generation("t").estimate() == before


def test_a_newcomer_behind_one_long_request_gets_a_share_instead_of_a_504() -> None:
    """One request ahead planned to use its whole budget: rather than refuse the next one,
    the engine asks it to stop early, after at least the smallest plan's time."""
    from tracing.budget import BudgetEngine, BudgetLedger, PlanLimits, QualityTable

    engine = BudgetEngine(
        PlanLimits(0, 256, 64, min_context_tokens=64, min_output_tokens=8),
        PlanLimits(0, 0, 0, 0, 0, 0),
        quality=QualityTable({}),
        cost=CostModel(),
    )
    now = time.perf_counter()
    ahead = engine.reservations.reserve("t", now + 3.0, 2900.0)
    ahead.start()
    ledger = BudgetLedger(3000)  # its smallest plan (~650 ms) fits; behind 2.9 s it would not
    plan = engine.plan_answer(ledger, k=4, rerank_available=False, target="t", queue=TargetQueue())
    assert plan.predicted_ms <= 3000
    assert ahead.stop_at is not None and ahead.stop_at < now + 2.9
    assert plan.stage_ms["queue"] == pytest.approx((ahead.stop_at - now) * 1000, abs=50)
    two = engine.reservations.reserve("t", now + 3.0, 2900.0)
    two.start()  # with two ahead, nobody is cut short: refused
    with pytest.raises(BudgetInfeasible):
        engine.plan_answer(BudgetLedger(3000), k=4, rerank_available=False, target="t")


def test_repeats_do_not_teach_that_a_new_prompt_will_be_cached() -> None:
    """Fifty repeats of one question are served whole from the prefix cache; a new question
    still finds only the shared system prompt cached, and the plan must not count on more."""
    from tracing.budget import BudgetEngine, PlanLimits, QualityTable

    engine = BudgetEngine(
        PlanLimits(0, 256, 64),
        PlanLimits(0, 0, 0, 0, 0, 0),
        quality=QualityTable({}),
        cost=CostModel(),
    )
    for _ in range(50):
        engine.observe_generation(
            "t", prompt_tokens=920, cached_tokens=919, ttft_ms=40.0, output_tokens=10,
            decode_ms=100.0, shared_prefix_tokens=60,
        )  # fmt: skip
    assert engine.cost.generation("t").estimate().cached_prefix_tokens == 60


def test_a_sent_request_holds_its_whole_service_until_its_first_token() -> None:
    """Sent to a server whose slots are full, a request waits in the server's queue: its
    service has not begun, however long ago it was sent. Counted from its sending, a queue of
    sent requests looked drained while the server still held them all."""
    book = Reservations()
    now = time.perf_counter()
    waiting = book.reserve("gpu", now + 10.0, 600.0)
    waiting.start()
    later = now + 1.0
    assert waiting.remaining_ms(later) == pytest.approx(600.0), "sent, not yet served"
    waiting.first_token()
    assert waiting.first_at is not None
    assert waiting.remaining_ms(waiting.first_at + 0.25) == pytest.approx(350.0)
