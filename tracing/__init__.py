"""Tracing beside every stage: OTel setup, the budget ledger and policy, metrics, alerts."""

from tracing.alerts import AlertEvaluator
from tracing.budget.ledger import BudgetLedger, Degradation, StageSpan
from tracing.metrics import REGISTRY, RequestMetricsMiddleware, metrics_payload
from tracing.setup import configure_tracing, current_trace_id, flush_tracing, shutdown_tracing

__all__ = [
    "REGISTRY",
    "AlertEvaluator",
    "BudgetLedger",
    "Degradation",
    "RequestMetricsMiddleware",
    "StageSpan",
    "configure_tracing",
    "current_trace_id",
    "flush_tracing",
    "metrics_payload",
    "shutdown_tracing",
]
