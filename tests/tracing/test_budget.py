"""The budget ledger: stage spans, charges, degradations, totals on the root span."""

from __future__ import annotations

import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

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
    ledger = BudgetLedger(1000, shares={"search": 0.01, "generate": 0.5})
    with ledger.stage("search"):
        time.sleep(0.02)  # 20 ms against 10 allocated: exceeded, whatever the machine's speed
    stage = ledger.begin("generate")
    stage.end()
    ledger.charge("search", 1.0)  # a second charge adds to the first run's bar

    search, generate = ledger.stages()
    assert (search.stage, generate.stage) == ("search", "generate")
    assert search.start_ms >= 0 and generate.start_ms >= search.start_ms + 20
    assert search.spent_ms == ledger.timings_ms["search"] and search.spent_ms >= 21
    assert (search.allocated_ms, generate.allocated_ms) == (10.0, 500.0)
    assert search.exceeded and not generate.exceeded


def test_each_request_counts_a_stage_allocation_once() -> None:
    def allocated() -> float:
        sample = metrics.REGISTRY.get_sample_value(
            "ragtime_stage_allocated_seconds_total", {"stage": "waterfall-test"}
        )
        return sample or 0.0

    before = allocated()
    for _ in range(2):
        ledger = BudgetLedger(1000, shares={"waterfall-test": 0.25})
        ledger.charge("waterfall-test", 1.0)
        ledger.charge("waterfall-test", 1.0)
    assert allocated() - before == pytest.approx(0.5)


def test_a_stage_before_the_budget_is_read_waits_for_it(spans: InMemorySpanExporter) -> None:
    """Auth runs before the body gives the request's budget: its span stays open, uncharged,
    until the budget is set, then carries that budget and ends where the stage ended."""
    ledger = BudgetLedger(30_000, shares={"auth": 0.01}, budget_pending=True)
    tracer = trace.get_tracer(__name__)
    with tracer.start_as_current_span("request"), ledger.stage("auth"):
        time.sleep(0.002)
    ended_ns = time.time_ns()
    assert "auth" not in ledger.timings_ms
    assert [s.name for s in spans.get_finished_spans()] == ["request"]
    time.sleep(0.01)
    ledger.set_budget(5000)
    ledger.set_budget(9000)  # once set, the budget stands
    (auth,) = [s for s in spans.get_finished_spans() if s.name == "auth"]
    assert attributes(auth)["ragtime.budget.budget_ms"] == 5000.0
    assert attributes(auth)["ragtime.budget.allocated_ms"] == 50.0
    assert auth.end_time is not None and auth.end_time <= ended_ns
    assert ledger.budget_ms == 5000 and ledger.timings_ms["auth"] >= 2.0


def test_a_failure_before_the_budget_is_read_is_charged_on_the_default() -> None:
    ledger = BudgetLedger(30_000, budget_pending=True)
    with pytest.raises(RuntimeError), ledger.stage("auth"):
        raise RuntimeError("the key store is down")
    ledger.set_budget()  # the route ends without a body
    assert ledger.budget_ms == 30_000 and "auth" in ledger.timings_ms
