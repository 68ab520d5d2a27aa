"""What the budget and tracing machinery itself costs per request, measured in-process.

One request's worth of it: a ``BudgetLedger``, a root span, the ten stages each in its span and
charged to the ledger (``generate`` through ``begin``/``end`` as the pipeline does), the cost
model's observations, one plan (with the queue of its target), its reservation, a degradation
recorded, the answer-moderation charge, and the root span's annotation and the budget summary. No
HTTP and no stage work: the stages are empty, so what is timed is the machinery alone, with the
real tracer provider (``tracing.configure_tracing()``; spans are recorded, and exported only if
``OTEL_*`` says so) and the real Prometheus metrics.
"""

from __future__ import annotations

import gc
import time

from opentelemetry import trace
from pydantic import BaseModel, Field

from app.config import DEFAULT_BUDGET_SHARES, Settings
from app.pipeline import build_budget_engine
from bench.stats import Summary, summarize
from tracing.budget import BudgetEngine, BudgetLedger
from tracing.setup import configure_tracing

STAGES = tuple(DEFAULT_BUDGET_SHARES)  # the ten stages of an answer


class MachineryCost(BaseModel):
    """Per-request cost of the budget and tracing machinery, in ms."""

    iterations: int
    stages: int = Field(description="Stages per request.")
    per_request_ms: Summary
    target_ms: float = 0.5
    met: bool = Field(description="Median under the target.")


def one_request(engine: BudgetEngine) -> None:
    """The machinery of one answered request, with empty stages."""
    tracer = trace.get_tracer("ragtime.bench.machinery")
    ledger = BudgetLedger(10_000.0, shares=DEFAULT_BUDGET_SHARES)
    with tracer.start_as_current_span("POST /v1/ask") as root:
        plan = engine.plan_answer(ledger, k=4, rerank_available=True, target="bench")
        for name in STAGES:
            if name == "generate":
                reservation = engine.reserve(plan, ledger)
                reservation.start()
                stage = ledger.begin(name, **{"gen_ai.request.max_tokens": 64})
                engine.observe_generation(
                    "bench",
                    prompt_tokens=150,
                    cached_tokens=50,
                    ttft_ms=1.0,
                    output_tokens=10,
                    decode_ms=1.0,
                )
                stage.end()
                reservation.release()
            elif name == "moderate.answer":
                ledger.charge(name, 0.01)
                with ledger.stage(name):
                    pass
                engine.observe_stage(name, 0.01, 1)
            else:
                with ledger.stage(name) as span:
                    if name == "rerank":
                        ledger.degrade(name, "rerank_reduced", "bench", span)
                        span.set_attribute("ragtime.plan.predicted_ms", plan.predicted_ms)
                engine.observe_stage(name, 0.01, 1)
        ledger.annotate(root)
        ledger.summary()
        _ = ledger.timings_ms


def measure_machinery(iterations: int = 2000, *, warmup: int = 200) -> MachineryCost:
    """Time ``one_request`` ``iterations`` times (after ``warmup``); the per-request summary."""
    configure_tracing()
    engine = build_budget_engine(Settings(rerank_candidates=20, max_output_tokens=64))
    for _ in range(warmup):
        one_request(engine)
    samples: list[float] = []
    gc.collect()
    for _ in range(iterations):
        started = time.perf_counter()
        one_request(engine)
        samples.append((time.perf_counter() - started) * 1000.0)
    summary = summarize(samples)
    return MachineryCost(
        iterations=iterations,
        stages=len(STAGES),
        per_request_ms=summary,
        met=summary.p50 is not None and summary.p50 < 0.5,
    )
