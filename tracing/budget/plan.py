"""What a plan is: the limits plans are made within (``PlanLimits``), a time-to-first-token
target (``FirstTokenTarget``), a plan (``Plan``: rerank candidates, context and output tokens,
its predictions) and the savings it made (``Action``); and a plan fitted to the context length
of the server it goes to (``fit_context_length``). The degradation policy
(``tracing.budget.policy``) chooses one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import NamedTuple

from tracing.budget.stage_names import StageName


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
    prune: bool = False
    """Whether a context may be pruned to the passages' sentences closest to the question."""
    ttft_target_ms: float | None = None
    """From arrival to the first answer token: plans predicted to meet it are preferred."""
    ttft_min_quality: float = 0.9
    """The least quality, as a share of the best plan's, a plan may keep to meet the TTFT
    target: below it the target is given up, not the answer."""

    def rerank_pool(self, k: int) -> int:
        """The most candidates a plan reranks for ``k`` passages: what each search finds."""
        return max(self.rerank_candidates, k)


class FirstTokenTarget(NamedTuple):
    """A time-to-first-token target a plan is made for: what it leaves after the time spent
    (``left_ms``), its ms from arrival, and whose it is ("the request's", "the service's")."""

    left_ms: float
    ms: float
    whose: str


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
    """From now to the last answer token, queue wait included."""
    actions: list[Action] = field(default_factory=list)
    stage_ms: dict[str, float] = field(default_factory=dict)
    """Predicted ms per stage: ``rerank``, ``queue``, ``generate`` (first token and decode)."""
    quality: float = 1.0
    target: str = ""
    prune: bool = False
    """The context is filled with the passages' sentences closest to the question."""
    first_token_ms: float = 0.0
    """Predicted from now to the typical first answer token (rerank, queue, prefill at the
    fitted cost, without the quantile's margin)."""
    meets_ttft: bool = True
    """Whether ``first_token_ms`` is within what the TTFT target leaves (True without one)."""

    @property
    def generation_ms(self) -> float:
        """Predicted from generation's start to its last token, queue wait included."""
        return self.stage_ms.get("queue", 0.0) + self.stage_ms.get(StageName.GENERATE, 0.0)

    def attributes(self) -> dict[str, int | float | bool]:
        """The plan, as the rerank span (where it is made) carries it."""
        return {
            "ragtime.plan.rerank_candidates": self.rerank_candidates,
            "ragtime.plan.context_tokens": self.context_tokens,
            "ragtime.plan.context_pruned": self.prune,
            "ragtime.plan.first_token_ms": round(self.first_token_ms, 3),
            "ragtime.plan.max_output_tokens": self.max_output_tokens,
            "ragtime.plan.predicted_ms": round(self.predicted_ms, 3),
            "ragtime.plan.quality": round(self.quality, 4),
        }


def fit_context_length(plan: Plan, limits: PlanLimits, context_length: int | None) -> Plan:
    """Shrink the plan's context so that prompt + output fits the server's ``context_length``
    (the backend caps the output for whatever is left over)."""
    if not context_length:
        return plan
    room = context_length - limits.prompt_overhead_tokens - plan.max_output_tokens
    if plan.context_tokens <= room:
        return plan
    context = max(room, min(limits.min_context_tokens, plan.context_tokens))
    actions = [a for a in plan.actions if a.action != "context_reduced"]
    actions.append(
        Action(
            StageName.ASSEMBLE,
            "context_reduced",
            f"{context} of {limits.context_tokens} tokens: the server's context length is "
            f"{context_length} and the answer may have {plan.max_output_tokens}",
        )
    )
    return replace(plan, context_tokens=context, actions=actions)
