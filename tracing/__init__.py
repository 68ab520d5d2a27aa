"""Tracing beside every stage: OpenTelemetry setup, the budget ledger, Prometheus metrics."""

from tracing.budget import BudgetLedger, Degradation, StageSpan
from tracing.metrics import REGISTRY, RequestMetricsMiddleware, metrics_payload
from tracing.setup import configure_tracing, current_trace_id, shutdown_tracing

__all__ = [
    "REGISTRY",
    "BudgetLedger",
    "Degradation",
    "RequestMetricsMiddleware",
    "StageSpan",
    "configure_tracing",
    "current_trace_id",
    "metrics_payload",
    "shutdown_tracing",
]
