"""A request whose trace is sampled out costs the budget machinery no span per stage (issue 60
§2): its stages are charged, learned from and propagated all the same."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tracing import BudgetLedger

tracer = trace.get_tracer(__name__)

SAMPLED_OUT = trace.set_span_in_context(
    trace.NonRecordingSpan(
        trace.SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=trace.TraceFlags(0))
    )
)


def test_a_sampled_out_request_opens_no_span_per_stage(spans: InMemorySpanExporter) -> None:
    """Its stages run in the request's own span, which records nothing and carries the trace id
    on (to the engine, in ``traceparent``); each is charged and learned from all the same."""
    ledger = BudgetLedger(1000)
    with tracer.start_as_current_span("request", context=SAMPLED_OUT) as root:
        with ledger.stage("search") as search:
            assert search is root and not search.is_recording()
            assert trace.get_current_span().get_span_context().trace_id == 0x1234
        generate = ledger.begin("generate")
        assert generate.span is root
        generate.end(RuntimeError("cut"))
    assert set(ledger.timings_ms) == {"search", "generate"}
    assert spans.get_finished_spans() == ()
    with tracer.start_as_current_span("sampled"), ledger.stage("rerank") as rerank:
        assert rerank.is_recording()
    assert [s.name for s in spans.get_finished_spans()] == ["rerank", "sampled"]
