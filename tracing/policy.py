"""The degradation policy: the largest plan whose predicted cost fits the remaining budget.

A plan fixes how many candidates rerank scores, how many context tokens the prompt may hold, and
how many tokens the answer may have. Starting from the configured plan, the policy gives up, in
order, until the prediction fits: rerank candidates (down to ``k``, then rerank altogether),
half the context, output tokens (down to ``min_output_tokens``), then the rest of the context
(down to ``min_context_tokens``). If even the smallest plan does not fit, ``plan`` raises
``BudgetInfeasible`` so the request can fail fast instead of running into its deadline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tracing.cost_model import CostModel


@dataclass(frozen=True)
class PlanLimits:
    rerank_candidates: int
    context_tokens: int
    max_output_tokens: int
    min_context_tokens: int = 64
    min_output_tokens: int = 16
    prompt_overhead_tokens: int = 120
    """System prompt, template and question: prefilled whatever the context holds."""
    reserve_ms: float = 50.0
    """Prompt assembly, answer moderation and streaming, which the plan does not size."""


@dataclass(frozen=True)
class Action:
    stage: str
    action: str
    reason: str


@dataclass(frozen=True)
class Plan:
    rerank_candidates: int
    """0 when rerank is skipped."""
    context_tokens: int
    max_output_tokens: int
    predicted_ms: float
    actions: list[Action] = field(default_factory=list)


class BudgetInfeasible(Exception):
    """Not even the smallest plan fits what is left of the budget."""

    def __init__(self, needed_ms: float, remaining_ms: float) -> None:
        self.needed_ms = needed_ms
        self.remaining_ms = remaining_ms
        super().__init__(
            f"the budget cannot be met: the smallest plan needs about {needed_ms:.0f} ms "
            f"and {max(remaining_ms, 0.0):.0f} ms remain"
        )


class DegradationPolicy:
    def __init__(self, cost: CostModel, limits: PlanLimits) -> None:
        self.cost = cost
        self.limits = limits

    def predict(self, candidates: int, context_tokens: int, output_tokens: int) -> float:
        """Predicted ms from rerank to the last answer token for this plan, queueing aside."""
        lim = self.limits
        return (
            self.cost.predict("rerank", candidates)
            + self.cost.predict("prefill", context_tokens + lim.prompt_overhead_tokens)
            + self.cost.predict("decode", output_tokens)
            + lim.reserve_ms
        )

    def plan(self, remaining_ms: float, *, k: int, rerank_available: bool, queued: int = 0) -> Plan:
        """The largest plan that fits ``remaining_ms``.

        ``queued`` requests ahead of this one at the generation backend each cost one request's
        service time (``service``: prefill and decode, learned per request); that wait comes off
        the top, since no plan of this request shrinks it.
        """
        lim = self.limits
        queue_ms = self.cost.predict("service", queued) if lim.max_output_tokens else 0.0
        total_ms, remaining_ms = remaining_ms, remaining_ms - queue_ms
        n = max(lim.rerank_candidates, k) if rerank_available else 0
        ctx, out = lim.context_tokens, lim.max_output_tokens
        actions: list[Action] = []

        def fits() -> bool:
            return self.predict(n, ctx, out) <= remaining_ms

        if n and not fits():
            spare = remaining_ms - self.predict(0, ctx, out)
            fitting = self._units("rerank", spare)
            if fitting >= k:
                actions.append(
                    Action("rerank", "rerank_reduced", f"{fitting} of {n} candidates fit")
                )
                n = fitting
            else:
                actions.append(
                    Action(
                        "rerank",
                        "rerank_skipped",
                        f"{n} candidates need ~{self.cost.predict('rerank', n):.0f} ms; "
                        f"~{max(spare, 0):.0f} ms to spare",
                    )
                )
                n = 0
        if not fits():
            ctx = self._shrink_context(
                remaining_ms, out, floor=max(lim.min_context_tokens, ctx // 2)
            )
        if not fits():
            spare = remaining_ms - self.predict(n, ctx, 0)
            out = max(min(self._units("decode", spare), out), lim.min_output_tokens)
        if not fits():
            ctx = self._shrink_context(remaining_ms, out, floor=lim.min_context_tokens)
        if ctx < lim.context_tokens:
            actions.append(
                Action("assemble", "context_reduced", f"{ctx} of {lim.context_tokens} tokens")
            )
        if out < lim.max_output_tokens:
            actions.append(
                Action("generate", "output_capped", f"{out} of {lim.max_output_tokens} tokens")
            )
        predicted = self.predict(n, ctx, out) + queue_ms
        if predicted > total_ms:
            raise BudgetInfeasible(predicted, total_ms)
        return Plan(n, ctx, out, predicted, actions)

    def _units(self, stage: str, spare_ms: float) -> int:
        rate = self.cost.rate(stage)
        if spare_ms <= 0:
            return 0
        return math.floor(spare_ms / rate) if rate > 0 else 1_000_000

    def _shrink_context(self, remaining_ms: float, out: int, *, floor: int) -> int:
        spare = remaining_ms - self.predict(0, 0, out)  # what is left for context tokens
        return max(min(self._units("prefill", spare), self.limits.context_tokens), floor)
