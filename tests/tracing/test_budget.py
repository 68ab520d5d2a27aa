"""The budget ledger: stage spans, charges, degradations, totals on the root span."""

from __future__ import annotations

import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.helpers.budget_stages import RequestClock
from tests.helpers.spans import attributes, number, parent
from tracing import BudgetLedger, metrics

tracer = trace.get_tracer(__name__)


def test_stages_are_child_spans_charged_to_the_ledger(spans: InMemorySpanExporter) -> None:
    ledger = BudgetLedger(1000)
    with tracer.start_as_current_span("request") as root:
        with ledger.stage("search", **{"ragtime.search.k": 3}):
            time.sleep(0.02)
        stage = ledger.begin("generate")
        time.sleep(0.01)
        stage.end()
        stage.end()  # idempotent
        ledger.annotate(root)
    finished = {s.name: s for s in spans.get_finished_spans()}
    search, generate, request = finished["search"], finished["generate"], finished["request"]
    assert parent(search).span_id == request.context.span_id
    assert parent(generate).span_id == request.context.span_id
    assert attributes(search)["ragtime.search.k"] == 3
    assert number(search, "ragtime.stage.duration_ms") >= 20
    assert attributes(search)["ragtime.budget.budget_ms"] == 1000
    assert attributes(search)["ragtime.budget.exceeded"] is False
    assert ledger.timings_ms["search"] >= 20 and ledger.timings_ms["generate"] >= 10
    assert number(request, "ragtime.budget.spent_ms") >= 30
    assert attributes(request)["ragtime.degradations"] == ()


def test_exceeding_the_budget_is_reported() -> None:
    ledger = BudgetLedger(5)
    time.sleep(0.01)
    summary = ledger.summary()
    assert summary["exceeded"] is True and ledger.exceeded
    assert summary["remaining_ms"] < 0
    assert summary["remaining_ms"] == pytest.approx(5 - summary["spent_ms"])


def test_a_failing_stage_marks_its_span_and_is_still_charged(
    spans: InMemorySpanExporter,
) -> None:
    ledger = BudgetLedger(1000)
    with pytest.raises(RuntimeError), ledger.stage("rerank"):
        raise RuntimeError("model exploded")
    (span,) = spans.get_finished_spans()
    assert span.status.status_code == StatusCode.ERROR
    assert "rerank" in ledger.timings_ms


def test_degradations_are_recorded_on_span_and_ledger(spans: InMemorySpanExporter) -> None:
    ledger = BudgetLedger(1000)
    with ledger.stage("rerank") as span:
        ledger.degrade("rerank", "rerank_skipped", "no cross-encoder", span)
    assert [d.as_dict() for d in ledger.degradations] == [
        {"stage": "rerank", "action": "rerank_skipped", "reason": "no cross-encoder"}
    ]
    (exported,) = spans.get_finished_spans()
    assert attributes(exported)["ragtime.degraded"] == "rerank_skipped"
    assert attributes(exported.events[0])["reason"] == "no cross-encoder"


def test_the_waterfall_says_when_each_stage_started_what_it_spent_and_was_allocated() -> None:
    """A stage is allocated the budget left as it starts, less what the stages after it are
    reserved: 20 ms for search (980 reserved after it), which it overruns; generate, started
    at 40 ms with 50 reserved after it, 910 ms, which it keeps to."""
    clock = RequestClock()
    ledger = BudgetLedger(1000, clock=clock)
    with ledger.stage("search", reserved_ms=980.0):
        clock.advance(30)
    clock.advance(10)
    stage = ledger.begin("generate", reserved_ms=50.0)
    clock.advance(500)
    stage.end()
    ledger.charge("search", 1.0)  # a second charge adds to the first run's bar

    search, generate = ledger.stages()
    assert (search.stage, generate.stage) == ("search", "generate")
    assert (search.start_ms, generate.start_ms) == (0.0, 40.0)
    assert search.spent_ms == ledger.timings_ms["search"] == 31.0
    assert (search.allocated_ms, generate.allocated_ms) == (20.0, 910.0)
    assert search.exceeded and not generate.exceeded
    assert ledger.overruns == ["search"] and not ledger.exceeded


def test_a_stage_that_ends_within_its_allocation_is_not_exceeded_at_any_share() -> None:
    """Generation taking 90% of the budget, ending before what is reserved after it: in time."""
    clock = RequestClock()
    ledger = BudgetLedger(1500, clock=clock)
    clock.advance(40)
    with ledger.stage("generate", reserved_ms=100.0):
        clock.advance(1350)  # until 1390 ms, 10 ms before the 1400 it was given
    (generate,) = ledger.stages()
    assert generate.allocated_ms == 1360.0 and not generate.exceeded
    assert ledger.overruns == []


def test_a_stage_that_began_with_the_rest_already_out_of_reach_answers_to_the_budget() -> None:
    """Embed starting at 300 ms of a 400 ms budget while generation is reserved 900: the plan was
    lost before embed ran, and embed is not what broke it. Over only past the budget itself."""
    for spent, over in ((50, False), (150, True)):
        clock = RequestClock()
        ledger = BudgetLedger(400, clock=clock)
        clock.advance(300)
        with ledger.stage("embed", reserved_ms=900.0):
            clock.advance(spent)
        (embed,) = ledger.stages()
        assert embed.allocated_ms == 100.0 and embed.exceeded is over
    clock = RequestClock()
    ledger = BudgetLedger(400, clock=clock)
    clock.advance(100)
    with ledger.stage("embed", reserved_ms=250.0):  # 50 ms left to it, and it took 60
        clock.advance(60)
    assert ledger.overruns == ["embed"]


def stage_observations(stage: str) -> tuple[float, list[str]]:
    """How many runs of ``stage`` the duration histogram observed, and the trace ids its
    buckets' exemplars name."""
    count, trace_ids = 0.0, []
    for family in metrics.REGISTRY.collect():
        if family.name != "ragtime_stage_duration_seconds":
            continue
        for sample in family.samples:
            if sample.labels.get("stage") != stage:
                continue
            if sample.name.endswith("_count"):
                count = sample.value
            if sample.exemplar is not None:
                trace_ids.append(sample.exemplar.labels["trace_id"])
    return count, trace_ids


def test_a_stage_run_is_one_observation_with_its_sampled_trace_as_exemplar() -> None:
    """Each run of a stage is one observation of the stage histogram (issue 60 §2: not one per
    figure); its exemplar names the trace when the trace is sampled, and nothing when it is
    not (no trace would be found)."""
    sampled_out = trace.set_span_in_context(
        trace.NonRecordingSpan(
            trace.SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=trace.TraceFlags(0))
        )
    )
    before, _ = stage_observations("observed-test")
    with tracer.start_as_current_span("not sampled", context=sampled_out):
        ledger = BudgetLedger(1000)
        with ledger.stage("observed-test"):
            pass
    assert stage_observations("observed-test") == (before + 1, [])
    with tracer.start_as_current_span("sampled") as root:
        ledger = BudgetLedger(1000)
        with ledger.stage("observed-test"):
            pass
        ledger.charge("observed-test", 1.0)  # a second run of it: another observation
    count, trace_ids = stage_observations("observed-test")
    assert count == before + 3
    assert trace_ids and set(trace_ids) == {format(root.get_span_context().trace_id, "032x")}


def test_a_later_run_given_until_later_grows_the_stage_allocation_by_that() -> None:
    """Extraction runs before generation (its allocation leaves generation its time) and again
    after it, instead of its answer (with only the finish left after it): the bar reaches the
    later run's end."""
    clock = RequestClock()
    ledger = BudgetLedger(1000, clock=clock)
    with ledger.stage("grown-test", reserved_ms=900.0):
        clock.advance(10)
    clock.advance(490)
    with ledger.stage("grown-test", reserved_ms=50.0):
        clock.advance(10)
    (grown,) = ledger.stages()
    assert (grown.start_ms, grown.spent_ms, grown.allocated_ms) == (0.0, 20.0, 950.0)
    assert not grown.exceeded


def test_a_stage_before_the_budget_is_read_waits_for_it(spans: InMemorySpanExporter) -> None:
    """Auth runs before the body gives the request's budget: its span stays open, uncharged,
    until the budget is set, then carries that budget (and its allocation in it) and ends
    where the stage ended."""
    clock = RequestClock()
    ledger = BudgetLedger(30_000, budget_pending=True, clock=clock)
    tracer = trace.get_tracer(__name__)
    with tracer.start_as_current_span("request"), ledger.stage("auth", reserved_ms=20.0):
        clock.advance(2)
    ended_ns = time.time_ns()
    assert "auth" not in ledger.timings_ms
    assert [s.name for s in spans.get_finished_spans()] == ["request"]
    clock.advance(10)
    ledger.set_budget(5000)
    ledger.set_budget(9000)  # once set, the budget stands
    (auth,) = [s for s in spans.get_finished_spans() if s.name == "auth"]
    assert attributes(auth)["ragtime.budget.budget_ms"] == 5000.0
    assert attributes(auth)["ragtime.budget.allocated_ms"] == 4980.0
    assert attributes(auth)["ragtime.budget.exceeded"] is False
    assert auth.end_time is not None and auth.end_time <= ended_ns
    assert ledger.budget_ms == 5000 and ledger.timings_ms["auth"] == 2.0


def test_a_failure_before_the_budget_is_read_is_charged_on_the_default() -> None:
    ledger = BudgetLedger(30_000, budget_pending=True)
    with pytest.raises(RuntimeError), ledger.stage("auth"):
        raise RuntimeError("the key store is down")
    ledger.set_budget()  # the route ends without a body
    assert ledger.budget_ms == 30_000 and "auth" in ledger.timings_ms
