"""The degradation policy: of the plans that fit what is left, the one that keeps most quality.

A plan fixes how many candidates rerank scores, how many context tokens the prompt may hold and
how many tokens the answer may have. The policy tries every rerank level and a ladder of context
sizes; for each it gives the answer as many output tokens as the time left allows (up to the
configured cap), predicts the plan's cost with the target's cost model at its quantile, and
weighs it with the measured ``QualityTable`` of the model the target serves
(``QualityTable.for_target``). The plan kept is the one of highest quality, the larger one among
equals. So the order in which savings are taken follows what each costs in quality per
millisecond saved, and a plan uses the budget it has rather than the minimum.

**Less that answers better.** Where the target's model answers better with less (a curve above
1 below its full setting: SmolLM2-135M keeps more key facts with half the context), the best
plan takes less even with budget to spare. Such a setting gives nothing up, so it is no
degradation: the plan names no action for it (its ``context_tokens`` and ``quality`` say what
it chose). A setting the budget forces, at or below the full setting's quality, is one, as
before.

When not even the smallest plan (``min_context_tokens``, ``min_output_tokens``, no rerank) fits,
``plan`` raises ``BudgetInfeasible``: a 504 is due only then, at measured costs.

**Pruning** (``PlanLimits.prune``): each context size may also be filled with every passage's
sentences closest to the question (``inference.prompt``) instead of the first passages whole,
weighed by the table's ``pruned`` curve; without that curve pruning is never chosen.

**The TTFT target** (``PlanLimits.ttft_target_ms``, a median target): of the plans whose
typical first token (the cost model's fitted line, without the margin that sizes budgets to
their quantile), counted from the request's arrival, is predicted within the target and that
keep at least ``ttft_min_quality`` of the best plan's quality, the best is kept; where there is
none, the best of all. So on a slow prefill (the CPU default) the context is pruned or cut to
reach the first token in time, as long as that costs little of the answer; a machine too slow
for the target at any acceptable quality keeps the answer and misses the target.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from tracing.budget.cost_model import CostModel, GenerationEstimate
from tracing.budget.errors import BudgetInfeasible
from tracing.budget.quality import QualityTable
from tracing.budget.stage_names import StageName

#: The context sizes tried, as shares of the configured context.
CONTEXT_LADDER = (1.0, 0.75, 0.5, 0.375, 0.25, 0.125, 0.0)


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


class DegradationPolicy:
    def __init__(self, cost: CostModel, limits: PlanLimits, quality: QualityTable) -> None:
        self.cost = cost
        self.limits = limits
        self.quality = quality

    def plan(
        self,
        remaining_ms: float,
        *,
        k: int,
        rerank_available: bool,
        target: str = "",
        queue_ms: float = 0.0,
        ttft: FirstTokenTarget | None = None,
        quality: QualityTable | None = None,
    ) -> Plan:
        """The plan of highest quality that fits ``remaining_ms``, after ``queue_ms`` of wait;
        of those whose first token comes within what ``ttft`` leaves, when any does. Where
        that target chose a smaller plan than the budget allows, its savings say so, naming
        the target (its ms, and whose). ``quality``: the table of the model ``target``
        serves, where the caller knows it; else the policy's table's for ``target``."""
        lim = self.limits
        table = quality if quality is not None else self.quality.for_target(target)
        full_n = lim.rerank_pool(k) if rerank_available else 0
        rerank_levels = sorted({full_n, max(k, full_n // 2), k, 0} if full_n else {0}, reverse=True)
        generating = lim.max_output_tokens > 0
        gen = self.cost.generation(target).estimate() if generating else None
        ctx_levels = (
            sorted(
                {
                    max(round(lim.context_tokens * f), lim.min_context_tokens)
                    for f in CONTEXT_LADDER
                },
                reverse=True,
            )
            if generating
            else [lim.context_tokens]
        )
        fills = (False, True) if generating and self._prunes(table) else (False,)
        candidates: list[_Candidate] = []
        smallest_ms = math.inf
        for n in rerank_levels:
            rerank_ms = self.cost.predict(StageName.RERANK, n)
            for ctx in ctx_levels:
                for prune in fills:
                    fit = self._fit(
                        table, n, rerank_ms, ctx, gen, remaining_ms, queue_ms, full_n, prune
                    )
                    if isinstance(fit, float):
                        smallest_ms = min(smallest_ms, fit)
                        continue
                    smallest_ms = min(smallest_ms, fit.predicted_ms)
                    if ttft is not None and fit.first_token_ms > ttft.left_ms:
                        fit = fit._replace(meets_ttft=False)
                    candidates.append(fit)
        if not candidates:
            raise BudgetInfeasible(smallest_ms, remaining_ms)
        # Equal quality (a knob the table does not weigh): the larger plan, and of a pruned and
        # a cut context of one size, the cut one.
        best = widest = max(candidates, key=_rank)
        floor = best.quality * self.limits.ttft_min_quality
        in_time = [c for c in candidates if c.meets_ttft and c.quality >= floor]
        if in_time:
            best = max(in_time, key=_rank)
        plan = self._explain(best.plan(target), full_n, table)
        if best == widest or ttft is None:
            return plan
        # The savings the budget alone would not have made were the TTFT target's choice.
        budget_alone = set(self._explain(widest.plan(target), full_n, table).actions)
        why = (
            f"; for a first token within {ttft.whose} TTFT target of {ttft.ms:.0f} ms "
            f"(predicted ~{best.first_token_ms:.0f} ms)"
        )
        actions = [
            a if a in budget_alone else replace(a, reason=a.reason + why) for a in plan.actions
        ]
        return replace(plan, actions=actions)

    def _prunes(self, table: QualityTable) -> bool:
        return self.limits.prune and table.weighs("pruned")

    def _fit(
        self,
        table: QualityTable,
        n: int,
        rerank_ms: float,
        ctx: int,
        gen: GenerationEstimate | None,
        remaining_ms: float,
        queue_ms: float,
        full_n: int,
        prune: bool = False,
    ) -> _Candidate | float:
        """The plan with ``n`` candidates and ``ctx`` context tokens and as many output tokens as
        fit; the smallest such plan's predicted ms when it does not fit."""
        lim = self.limits
        rerank_share = n / full_n if full_n else 1.0
        if gen is None:  # retrieval only
            predicted = rerank_ms + lim.reserve_ms
            if predicted > remaining_ms:
                return predicted
            quality = table.quality("rerank", rerank_share)
            return _Candidate(n, 0, 0, predicted, rerank_ms, 0.0, None, quality)
        first_ms = gen.prompt_ttft_ms(ctx + lim.prompt_overhead_tokens)
        fixed = rerank_ms + queue_ms + first_ms + lim.reserve_ms
        per_token = gen.decode_ms_per_token
        spare = remaining_ms - fixed
        out = lim.max_output_tokens
        if per_token > 0:
            out = min(out, 1 + math.floor(max(spare, 0.0) / per_token))
        if spare < 0 or out < lim.min_output_tokens:
            return fixed + gen.decode_ms(lim.min_output_tokens)
        gen_ms = first_ms + gen.decode_ms(out)
        quality = table.plan_quality(
            context=ctx / lim.context_tokens if lim.context_tokens else 1.0,
            output=out / lim.max_output_tokens,
            rerank=rerank_share,
            pruned=prune,
        )
        return _Candidate(
            n,
            ctx,
            out,
            rerank_ms + queue_ms + gen_ms + lim.reserve_ms,
            rerank_ms,
            queue_ms,
            gen_ms,
            quality,
            prune,
            # The target is for the typical first token (the fitted line, without the margin
            # that sizes the budget to its quantile): a TTFT p50 target.
            rerank_ms + queue_ms + first_ms - gen.ttft_margin_ms,
        )

    def _explain(self, plan: Plan, full_n: int, table: QualityTable) -> Plan:
        """The plan's savings, each an action: those that answer better than the full setting
        (the table's curve above 1 there) give nothing up and are none."""
        lim = self.limits
        actions: list[Action] = []
        rerank_share = plan.rerank_candidates / full_n if full_n else 1.0
        context_share = plan.context_tokens / lim.context_tokens if lim.context_tokens else 1.0
        output_share = (
            plan.max_output_tokens / lim.max_output_tokens if lim.max_output_tokens else 1.0
        )
        if full_n and table.better_than_full("rerank", rerank_share):
            pass  # fewer candidates rank better: nothing given up
        elif full_n and plan.rerank_candidates == 0:
            actions.append(
                Action(
                    StageName.RERANK,
                    "rerank_skipped",
                    f"{full_n} candidates need ~{self.cost.predict('rerank', full_n):.0f} ms",
                )
            )
        elif plan.rerank_candidates < full_n:
            actions.append(
                Action(
                    StageName.RERANK,
                    "rerank_reduced",
                    f"{plan.rerank_candidates} of {full_n} candidates fit",
                )
            )
        if table.better_than_full("pruned" if plan.prune else "context", context_share):
            pass  # this context answers better than the whole one: nothing given up
        elif plan.prune:
            actions.append(
                Action(
                    StageName.ASSEMBLE,
                    "context_pruned",
                    f"{plan.context_tokens} of {lim.context_tokens} tokens, each passage's "
                    "sentences closest to the question",
                )
            )
        elif lim.max_output_tokens and plan.context_tokens < lim.context_tokens:
            actions.append(
                Action(
                    StageName.ASSEMBLE,
                    "context_reduced",
                    f"{plan.context_tokens} of {lim.context_tokens} tokens",
                )
            )
        if plan.max_output_tokens < lim.max_output_tokens and not table.better_than_full(
            "output", output_share
        ):
            actions.append(
                Action(
                    StageName.GENERATE,
                    "output_capped",
                    f"{plan.max_output_tokens} of {lim.max_output_tokens} tokens",
                )
            )
        return replace(plan, actions=actions)


class _Candidate(NamedTuple):
    """A plan the policy weighs, before it is chosen: plain figures, as the policy weighs some
    fifty a request."""

    rerank_candidates: int
    context_tokens: int
    max_output_tokens: int
    predicted_ms: float
    rerank_ms: float
    queue_ms: float
    generate_ms: float | None
    """None for a search's plan, which generates nothing."""
    quality: float
    prune: bool = False
    first_token_ms: float = 0.0
    meets_ttft: bool = True

    def plan(self, target: str) -> Plan:
        stage_ms: dict[str, float] = {StageName.RERANK: self.rerank_ms}
        if self.generate_ms is not None:
            stage_ms.update({"queue": self.queue_ms, StageName.GENERATE: self.generate_ms})
        return Plan(
            self.rerank_candidates,
            self.context_tokens,
            self.max_output_tokens,
            self.predicted_ms,
            stage_ms=stage_ms,
            quality=self.quality,
            target=target if self.generate_ms is not None else "",
            prune=self.prune,
            first_token_ms=self.first_token_ms,
            meets_ttft=self.meets_ttft,
        )


def _rank(plan: _Candidate) -> tuple[float, float, bool]:
    """What makes one plan better than another: quality, then the larger plan, then a cut
    context over a pruned one of the same size."""
    return (plan.quality, plan.predicted_ms, not plan.prune)


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
