"""What the budget and tracing machinery itself costs per request, measured in-process.

One request's worth of it: a ``BudgetLedger``, a root span, the eight stages each in its span and
charged to the ledger (``generate`` through ``begin``/``end`` as the pipeline does), the cost
model's observations, one degradation-policy plan, a degradation recorded, the answer-moderation
charge, and the root span's annotation and the budget summary. No HTTP and no stage work: the
stages are empty, so what is timed is the machinery alone, with the real tracer provider
(``tracing.configure_tracing()``; spans are recorded, and exported only if ``OTEL_*`` says so)
and the real Prometheus metrics.
"""

from __future__ import annotations

import gc
import time

from opentelemetry import trace
from pydantic import BaseModel, Field

from app.bench.stats import Summary, summarize
from app.config import DEFAULT_BUDGET_SHARES
from tracing.budget import BudgetLedger
from tracing.cost_model import CostModel
from tracing.policy import DegradationPolicy, PlanLimits
from tracing.setup import configure_tracing

STAGES = tuple(DEFAULT_BUDGET_SHARES)  # the eight stages of an answer


class MachineryCost(BaseModel):
    """Per-request cost of the budget and tracing machinery, in ms."""

    iterations: int
    stages: int = Field(description="Stages per request.")
    per_request_ms: Summary
    target_ms: float = 0.5
    met: bool = Field(description="Median under the target.")


def one_request(cost: CostModel, policy: DegradationPolicy) -> None:
    """The machinery of one answered request, with empty stages."""
    tracer = trace.get_tracer("ragtime.bench.machinery")
    ledger = BudgetLedger(10_000.0, shares=DEFAULT_BUDGET_SHARES)
    with tracer.start_as_current_span("POST /v1/ask") as root:
        for name in STAGES:
            if name == "generate":
                stage = ledger.begin(name, **{"gen_ai.request.max_tokens": 64})
                cost.observe("prefill", 1.0, 100)
                cost.observe("decode", 1.0, 10)
                stage.end()
            elif name == "moderate.answer":
                ledger.charge(name, 0.01)
                with ledger.stage(name):
                    pass
                cost.observe(name, 0.01, 1)
            else:
                with ledger.stage(name) as span:
                    if name == "search":
                        plan = policy.plan(ledger.remaining_ms, k=4, rerank_available=True)
                    if name == "rerank":
                        ledger.degrade(name, "rerank_reduced", "bench", span)
                        span.set_attribute("ragtime.plan.predicted_ms", plan.predicted_ms)
                cost.observe(name, 0.01, 1)
        ledger.annotate(root)
        ledger.summary()
        _ = ledger.timings_ms


def measure_machinery(iterations: int = 2000, *, warmup: int = 200) -> MachineryCost:
    """Time ``one_request`` ``iterations`` times (after ``warmup``); the per-request summary."""
    configure_tracing()
    cost = CostModel()
    policy = DegradationPolicy(cost, PlanLimits(20, 768, 64))
    for _ in range(warmup):
        one_request(cost, policy)
    samples: list[float] = []
    gc.collect()
    for _ in range(iterations):
        started = time.perf_counter()
        one_request(cost, policy)
        samples.append((time.perf_counter() - started) * 1000.0)
    summary = summarize(samples)
    return MachineryCost(
        iterations=iterations,
        stages=len(STAGES),
        per_request_ms=summary,
        met=summary.p50 is not None and summary.p50 < 0.5,
    )
