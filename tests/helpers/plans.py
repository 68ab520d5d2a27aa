"""The plan limits and quality table the budget's unit tests plan with: round figures whose
plans can be worked out by hand; and a target's reported load as the session reads it."""

from __future__ import annotations

from dataclasses import dataclass

from tracing.budget import PlanLimits, QualityTable

#: 20 rerank candidates, 800 context tokens, 100 output tokens, at least 100 and 10, a prompt
#: overhead of 100 tokens and no reserve.
LIMITS = PlanLimits(
    rerank_candidates=20,
    context_tokens=800,
    max_output_tokens=100,
    min_context_tokens=100,
    min_output_tokens=10,
    prompt_overhead_tokens=100,
    reserve_ms=0.0,
)
#: Quality proportional to the context and output kept.
LINEAR = QualityTable({"context": [(0.0, 0.0), (1.0, 1.0)], "output": [(0.0, 0.0), (1.0, 1.0)]})


@dataclass
class Load:
    """A serving target's reported load (``tracing.budget.serving.ReportedLoad``)."""

    waiting: int = 0
    max_running: int | None = 1
    others: int | None = None
    earliest_deadline_first: bool = False
    preempts: bool = False
