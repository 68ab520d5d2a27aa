"""What the budget and tracing machinery itself costs per request, measured in-process.

One request's worth of it: a ``BudgetLedger``, a root span, the request's budget session (the
real ``BudgetSession``: admission, one plan with the queue of its target, its reservation, stage
deadlines, the cost model's observations), the eleven stages each through the session as the
pipeline runs them (``session.run``; generation through ``session.generate``), a degradation
recorded, the answer-moderation charge, and the root span's annotation and the budget summary.
No HTTP and no stage work: the stages are empty, so what is timed is the machinery alone, with
the real tracer provider (``tracing.configure_tracing()``; spans are recorded, and exported
only if ``OTEL_*`` says so) and the real Prometheus metrics.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.trace import Span
from pydantic import BaseModel, Field

from app.pipeline.budget_engine import build_budget_engine, cost_model
from app.settings import Settings
from bench.harness.stats import Summary, summarize
from inference import Usage
from tracing.budget import (
    Allowance,
    BudgetEngine,
    BudgetLedger,
    BudgetSession,
    GenerationAllowance,
    StageName,
)
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
    last_at: float | None = None
    streamed_tokens: int = 0
    prompt_tokens: int = 0
    may_have_queued: bool = True
    shared_prefix_tokens: int | None = None


@dataclass(frozen=True)
class Done:
    """An empty stage's result, recorded on its span as a stage's is (``StageResult``)."""

    degradation: tuple[str, str] | None = None
    earlier_ms: float = 0.0

    def record(self, span: Span) -> None:
        if span.is_recording():
            span.set_attribute("ragtime.bench.empty", True)


@dataclass(frozen=True)
class EmptyStage:
    """A stage that does nothing but ask what a stage asks of its allowance."""

    name: StageName
    result: Done = Done()

    async def run(self, inputs: None, allowance: Allowance) -> Done:
        if self.name is StageName.ATTRIBUTE:
            allowance.room()  # what attribution asks before it runs
        return self.result


class EmptyGeneration:
    """A generation of no text that ends at once, said where it went."""

    name = StageName.GENERATE

    def span_attributes(self, max_tokens: int) -> dict[str, str | int | float]:
        return {"gen_ai.request.max_tokens": max_tokens}

    async def run(
        self, inputs: None, allowance: GenerationAllowance
    ) -> AsyncGenerator[str | Ended, None]:
        allowance.routed("bench", None)
        started = time.perf_counter()
        usage = Usage(prompt_tokens=150, cached_tokens=50, completion_tokens=10)
        yield Ended("stop", "bench", started, started, usage, shared_prefix_tokens=50)


#: The empty stages, as the pipeline runs them (a reduced rerank, the answer filter's time).
EMPTY_STAGES = {
    StageName.RERANK: EmptyStage(StageName.RERANK, Done(degradation=("rerank_reduced", "bench"))),
    StageName.MODERATE_ANSWER: EmptyStage(StageName.MODERATE_ANSWER, Done(earlier_ms=0.01)),
}


async def one_request(engine: BudgetEngine) -> None:
    """The machinery of one answered request, with empty stages: the real budget session, asked
    as the pipeline asks it (``session.run`` per stage, ``session.generate`` for generation)."""
    tracer = trace.get_tracer("ragtime.bench.machinery")
    ledger = BudgetLedger(10_000.0)
    with tracer.start_as_current_span("POST /v1/ask") as root:
        session = BudgetSession(
            engine,
            ledger,
            route="/v1/ask",
            k=4,
            rerank_available=True,
            question="q",
            serving=BenchTarget(),
        )
        session.check_feasible()
        with session:
            for name in STAGES:
                if name is StageName.AUTH:
                    ledger.charge(name, 0.01)
                elif name is StageName.GENERATE:
                    async with session.generate(EmptyGeneration(), None) as generation:
                        async for _ in generation:
                            pass
                else:
                    if name is StageName.RERANK:
                        session.plan()
                    await session.run(EMPTY_STAGES.get(name, EmptyStage(name)), None)
        ledger.annotate(root)
        ledger.summary()
        _ = ledger.timings_ms


def measure_machinery(iterations: int = 2000, *, warmup: int = 200) -> MachineryCost:
    """Time ``one_request`` ``iterations`` times (after ``warmup``); the per-request summary."""
    configure_tracing()
    settings = Settings(rerank_candidates=20, max_output_tokens=64)
    engine = build_budget_engine(settings, cost_model(settings))

    async def timed() -> list[float]:
        for _ in range(warmup):
            await one_request(engine)
        samples: list[float] = []
        gc.collect()
        for _ in range(iterations):
            started = time.perf_counter()
            await one_request(engine)
            samples.append((time.perf_counter() - started) * 1000.0)
        return samples

    summary = summarize(asyncio.run(timed()))
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
