"""Each stage's allocation is the plan's: the budget left as it starts, less what the stages
after it are reserved (``allowances.reserved_after``), so that time a stage did not use flows to
the stages after it; a stage is exceeded only when it ran past that. The request runs through
its budget session on a clock that moves only as the test says: no figure depends on the
machine."""

from __future__ import annotations

from dataclasses import replace

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.helpers.budget_stages import Generates, RequestClock, Takes
from tests.helpers.plans import LIMITS, LINEAR
from tests.helpers.spans import attributes
from tracing import metrics
from tracing.budget import (
    BudgetEngine,
    BudgetLedger,
    BudgetSession,
    GenerationPrior,
    PlanLimits,
    Rules,
    StageName,
    StageRecord,
)
from tracing.budget.cost_model import CostModel
from tracing.budget.plan import Plan

BUDGET_MS = 1500.0
#: The plan's reserve for what it does not size (prompt assembly, answer moderation, streaming).
RESERVE_MS = 50.0
#: A first token in 65 ms for a full prompt, then 12 ms a token: a full answer fills most of
#: a 1.5 s budget, as the CPU default's does.
SLOW_DECODE = GenerationPrior(fixed_ms=20.0, prefill_ms_per_token=0.05, decode_ms_per_token=12.0)
BEFORE_THE_PLAN = (
    StageName.AUTH,
    StageName.MODERATE_QUESTION,
    StageName.EMBED,
    StageName.SEARCH,
)
BEFORE_GENERATION = (StageName.MODERATE_PASSAGES, StageName.ASSEMBLE, StageName.EXTRACT)


class Serving:
    """One target, idle."""

    earliest_deadline_first = False
    context_length = None

    def cost_targets(self, question: str = "") -> list[str]:
        return ["large"]

    def target_load(self, target: str) -> None:
        return None


def engine() -> BudgetEngine:
    search = PlanLimits(20, 0, 0, 0, 0, 0, 0.0)
    built = BudgetEngine(
        replace(LIMITS, reserve_ms=RESERVE_MS),
        search,
        quality=LINEAR,
        rules=Rules(),
        cost=CostModel(),
    )
    built.cost.seed(
        {"rerank": 1.0, "embed": 1.0, "search": 1.0, "moderate.answer": 1.0, "attribute": 5.0}
    )
    built.cost.calibrate("large", SLOW_DECODE)
    return built


async def answered(
    budget_ms: float = BUDGET_MS, *, rerank_ms: float | None = None
) -> tuple[BudgetLedger, Plan]:
    """One answer, each stage through its request's budget session as the pipeline runs it:
    those the plan does not size take 1 ms; rerank its planned time unless told (``rerank_ms``);
    generation its planned time, or until its allowance says to stop."""
    clock = RequestClock()
    ledger = BudgetLedger(budget_ms, clock=clock)
    session = BudgetSession(
        engine(), ledger, route="/v1/ask", k=4, rerank_available=True, question="q",
        serving=Serving(),
    )  # fmt: skip
    with session:
        for name in BEFORE_THE_PLAN:
            await session.run(Takes(name, clock, 1.0), None)
        plan = session.plan()
        rerank = plan.stage_ms[StageName.RERANK] if rerank_ms is None else rerank_ms
        await session.run(Takes(StageName.RERANK, clock, rerank), None)
        for name in BEFORE_GENERATION:
            await session.run(Takes(name, clock, 1.0), None)
        async with session.generate(Generates(clock, plan.generation_ms), None) as generation:
            async for _ in generation:
                pass
            await session.run(Takes(StageName.MODERATE_ANSWER, clock, 1.0), None)
    await session.run(Takes(StageName.ATTRIBUTE, clock, 5.0, optional=True), None)
    return ledger, plan


def bar(ledger: BudgetLedger, stage: StageName) -> StageRecord:
    (found,) = [r for r in ledger.stages() if r.stage == stage]
    return found


def overruns(stage: StageName) -> float:
    sample = metrics.REGISTRY.get_sample_value(
        "ragtime_stage_budget_exceeded_total", {"stage": stage.value}
    )
    return sample or 0.0


def last_span(spans: InMemorySpanExporter, stage: StageName) -> ReadableSpan:
    return [s for s in spans.get_finished_spans() if s.name == stage][-1]


async def test_a_skipped_reranks_time_reaches_generation() -> None:
    reranked, plan = await answered()
    skipped, _ = await answered(rerank_ms=0.0)  # the reranker was down: rerank skipped
    assert plan.stage_ms[StageName.RERANK] == 20.0  # 20 candidates at 1 ms
    generation = [bar(ledger, StageName.GENERATE) for ledger in (reranked, skipped)]
    assert generation[1].allocated_ms - generation[0].allocated_ms == pytest.approx(20.0)
    for generate in generation:  # all that is left as it starts: no stage after it is reserved
        assert generate.allocated_ms == pytest.approx(BUDGET_MS - generate.start_ms)


@pytest.mark.parametrize("budget_ms", [BUDGET_MS, 1200.0])
async def test_a_request_that_keeps_to_its_plan_has_no_stage_exceeded(
    budget_ms: float, spans: InMemorySpanExporter
) -> None:
    """Generation spends far more than a fixed share of the budget (72% of it) in a request
    that keeps to its plan: with time to spare (the answer's whole length fits), or with a plan
    that fills the budget (the stages it does not size use its reserve, and generation stops
    where its allowance says). Nothing is over, and the span says what the waterfall says."""
    before = overruns(StageName.GENERATE)
    ledger, plan = await answered(budget_ms)
    generate = bar(ledger, StageName.GENERATE)
    assert plan.max_output_tokens > 0 and generate.spent_ms > 0.72 * budget_ms
    assert not ledger.exceeded and ledger.spent_ms <= budget_ms
    assert [r.stage for r in ledger.stages() if r.exceeded] == [] and ledger.overruns == []
    assert overruns(StageName.GENERATE) == before
    span = last_span(spans, StageName.GENERATE)
    assert attributes(span)["ragtime.budget.allocated_ms"] == generate.allocated_ms
    assert attributes(span)["ragtime.budget.spent_ms"] == generate.spent_ms
    assert attributes(span)["ragtime.budget.exceeded"] is False


async def test_a_stage_past_its_planned_allocation_is_flagged_in_a_request_within_budget(
    spans: InMemorySpanExporter,
) -> None:
    """Rerank runs past what the plan gave it (the budget less generation's predicted time and
    the reserve), 20 ms into the reserve: it is over; the stages after it keep to what is left
    of it, generation stops where its allowance says; the request ends within its budget."""
    before = overruns(StageName.RERANK)
    _, plan = await answered()
    rerank_start_ms = 4.0  # after the four stages before the plan, 1 ms each
    given_ms = BUDGET_MS - rerank_start_ms - plan.generation_ms - RESERVE_MS
    ledger, _ = await answered(rerank_ms=given_ms + 20.0)
    rerank = bar(ledger, StageName.RERANK)
    assert rerank.allocated_ms == pytest.approx(given_ms) and rerank.exceeded
    assert ledger.overruns == [StageName.RERANK] and not ledger.exceeded
    assert overruns(StageName.RERANK) == before + 1
    span = last_span(spans, StageName.RERANK)
    assert attributes(span)["ragtime.budget.exceeded"] is True
    assert attributes(span)["ragtime.budget.allocated_ms"] == rerank.allocated_ms


async def test_before_the_plan_a_stage_leaves_the_smallest_plan_its_time() -> None:
    """Before the plan, what is reserved after a stage is the least the rest needs, as
    admission counts it: embed and search still to come, the answer's moderation, the smallest
    generation and the plan's reserve."""
    ledger, _ = await answered()
    smallest = engine().smallest_generation_ms("large", 0.5)
    auth, search = bar(ledger, StageName.AUTH), bar(ledger, StageName.SEARCH)
    after_search = 1.0 + smallest + RESERVE_MS  # the answer's moderation, then the rest
    assert search.allocated_ms == pytest.approx(BUDGET_MS - search.start_ms - after_search)
    assert auth.allocated_ms == pytest.approx(BUDGET_MS - 2.0 - after_search)  # embed, search
