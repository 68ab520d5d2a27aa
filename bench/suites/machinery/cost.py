"""What the budget and tracing machinery itself costs per request, measured in-process.

One request's worth of it: a ``BudgetLedger``, a root span, the request's budget session (the
real ``BudgetSession``: admission, one plan with the queue of its target, its reservation,
stage deadlines, the cost model's observations), the eleven stages each in its span and charged to
the ledger (``generate`` through ``begin``/``end`` as the pipeline does), a degradation recorded,
the answer-moderation charge, and the root span's annotation and the budget summary. No
HTTP and no stage work: the stages are empty, so what is timed is the machinery alone, with the
real tracer provider (``tracing.configure_tracing()``; spans are recorded, and exported only if
``OTEL_*`` says so) and the real Prometheus metrics.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass

from opentelemetry import trace
from pydantic import BaseModel, Field

from app.pipeline.budget_engine import build_budget_engine
from app.settings import DEFAULT_BUDGET_SHARES, Settings
from bench.harness.stats import Summary, summarize
from inference import Usage
from tracing.budget import BudgetEngine, BudgetLedger, BudgetSession, StageName
from tracing.setup import configure_tracing

STAGES = tuple(StageName)  # the eleven stages of a hybrid search's answer


class MachineryCost(BaseModel):
    """Per-request cost of the budget and tracing machinery, in ms."""

    iterations: int
    stages: int = Field(description="Stages per request.")
    per_request_ms: Summary
    target_ms: float = 0.5
    met: bool = Field(description="Median under the target.")


class BenchTarget:
    """Where the bench's answers go, as the budget session asks of a backend: one in-process
    target served earliest deadline first, as llama.cpp is."""

    earliest_deadline_first = True
    context_length = None

    def cost_targets(self, question: str = "") -> list[str]:
        return ["bench"]

    def target_load(self, target: str) -> None:
        return None


@dataclass(frozen=True)
class Ended:
    """How the bench's empty generation ended (``GenerationResult``)."""

    finish_reason: str
    target: str
    started: float
    first_at: float | None
    usage: Usage | None
    queue_ms: float = 0.0


def one_request(engine: BudgetEngine) -> None:
    """The machinery of one answered request, with empty stages: the real budget session, in
    the order the pipeline asks it."""
    tracer = trace.get_tracer("ragtime.bench.machinery")
    ledger = BudgetLedger(10_000.0, shares=DEFAULT_BUDGET_SHARES)
    with tracer.start_as_current_span("POST /v1/ask") as root:
        session = BudgetSession(
            engine, ledger, route="/v1/ask", question="q", serving=BenchTarget()
        )
        session.admit()
        for name in STAGES:
            if name is StageName.AUTH:
                ledger.charge(name, 0.01)
            elif name is StageName.GENERATE:
                session.reserve()
                stage = ledger.begin(name, **{"gen_ai.request.max_tokens": 64})
                with session.holding():
                    session.begin(name, stage.span)
                    session.routed("bench", None, stage.span)
                    started = time.perf_counter()
                    usage = Usage(prompt_tokens=150, cached_tokens=50, completion_tokens=10)
                    ended = Ended("stop", "bench", started, started, usage)
                    session.generation_ended(ended, stage.span, shared_prefix_tokens=50)
                stage.end()
            elif name is StageName.MODERATE_ANSWER:
                ledger.charge(name, 0.01)
                with ledger.stage(name):
                    pass
                session.observe_ms(name, 0.01)
            elif name is StageName.ATTRIBUTE:
                with ledger.stage(name):
                    session.attribution()
            else:
                if name is StageName.RERANK:
                    session.plan(k=4, rerank_available=True)
                with ledger.stage(name) as span:
                    session.begin(name, span)
                    started = time.perf_counter()
                    if name is StageName.RERANK:
                        ledger.degrade(name, "rerank_reduced", "bench", span)
                        session.deadline_for(name)
                session.observe(name, started)
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


def machinery_line(cost: MachineryCost) -> str:
    s = cost.per_request_ms
    return (
        f"budget and tracing machinery per request ({cost.stages} stages, in-process, "
        f"n={s.n}): p50 {s.fmt('p50', 3)} ms, p95 {s.fmt('p95', 3)} ms, p99 {s.fmt('p99', 3)} ms. "
        f"Target under {cost.target_ms:g} ms at the median: {'met' if cost.met else 'NOT met'}"
    )
