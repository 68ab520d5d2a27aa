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
from dataclasses import replace
from typing import NamedTuple

from tracing.budget.cost_model import CostModel, GenerationEstimate
from tracing.budget.errors import BudgetInfeasible
from tracing.budget.plan import Action, FirstTokenTarget, Plan, PlanLimits
from tracing.budget.quality import QualityTable
from tracing.budget.stage_names import StageName

#: The context sizes tried, as shares of the configured context.
CONTEXT_LADDER = (1.0, 0.75, 0.5, 0.375, 0.25, 0.125, 0.0)


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
        # What each rerank level and each context weigh whatever the budget: read once, not for
        # each plan weighed. A pruned and a cut context of one size cost the same: only the one
        # that keeps more is weighed (the cut one where they keep the same).
        contexts = [
            max(
                (self._context(table, ctx, prune, gen) for prune in fills),
                key=lambda context: (context.quality, not context.prune),
            )
            for ctx in ctx_levels
        ]
        ttft_left_ms = ttft.left_ms if ttft is not None else math.inf
        candidates: list[_Candidate] = []
        smallest_ms = math.inf  # of the plans that do not fit: what a refusal says is needed
        for n in rerank_levels:
            rerank = _Rerank(
                n,
                self.cost.predict(StageName.RERANK, n),
                table.quality("rerank", n / full_n if full_n else 1.0),
            )
            for context in contexts:
                fit = self._fit(table, rerank, context, gen, remaining_ms, queue_ms, ttft_left_ms)
                if isinstance(fit, float):
                    smallest_ms = min(smallest_ms, fit)
                else:
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

    def _context(
        self, table: QualityTable, ctx: int, prune: bool, gen: GenerationEstimate | None
    ) -> _Context:
        """A context of ``ctx`` tokens, pruned or cut: what it keeps and its first token."""
        lim = self.limits
        if gen is None:  # retrieval only
            return _Context(ctx, prune, 0.0, 1.0)
        knob = "pruned" if prune else "context"
        quality = table.quality(knob, ctx / lim.context_tokens if lim.context_tokens else 1.0)
        return _Context(ctx, prune, gen.prompt_ttft_ms(ctx + lim.prompt_overhead_tokens), quality)

    def _fit(
        self,
        table: QualityTable,
        rerank: _Rerank,
        context: _Context,
        gen: GenerationEstimate | None,
        remaining_ms: float,
        queue_ms: float,
        ttft_left_ms: float,
    ) -> _Candidate | float:
        """The plan with ``rerank``'s candidates and ``context`` and as many output tokens as
        fit, and whether its first token comes within ``ttft_left_ms``; the smallest such plan's
        predicted ms when it does not fit."""
        lim = self.limits
        n, rerank_ms = rerank.candidates, rerank.ms
        if gen is None:  # retrieval only
            predicted = rerank_ms + lim.reserve_ms
            if predicted > remaining_ms:
                return predicted
            return _Candidate(n, 0, 0, predicted, rerank_ms, 0.0, None, rerank.quality)
        first_ms = context.first_ms
        fixed = rerank_ms + queue_ms + first_ms + lim.reserve_ms
        per_token = gen.decode_ms_per_token
        spare = remaining_ms - fixed
        out = lim.max_output_tokens
        if per_token > 0:
            out = min(out, 1 + math.floor(max(spare, 0.0) / per_token))
        if spare < 0 or out < lim.min_output_tokens:
            return fixed + gen.decode_ms(lim.min_output_tokens)
        gen_ms = first_ms + gen.decode_ms(out)
        quality = (
            context.quality * table.quality("output", out / lim.max_output_tokens) * rerank.quality
        )
        # The target is for the typical first token (the fitted line, without the margin that
        # sizes the budget to its quantile): a TTFT p50 target.
        first_token_ms = rerank_ms + queue_ms + first_ms - gen.ttft_margin_ms
        return _Candidate(
            n,
            context.tokens,
            out,
            rerank_ms + queue_ms + gen_ms + lim.reserve_ms,
            rerank_ms,
            queue_ms,
            gen_ms,
            quality,
            context.prune,
            first_token_ms,
            first_token_ms <= ttft_left_ms,
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


class _Rerank(NamedTuple):
    """One rerank level the policy weighs: its candidates, their predicted ms, what it keeps."""

    candidates: int
    ms: float
    quality: float


class _Context(NamedTuple):
    """One context size and fill the policy weighs, as every rerank level weighs it."""

    tokens: int
    prune: bool
    first_ms: float
    """Its prompt's first token at the cost model's quantile (0 for a search's plan)."""
    quality: float
    """What it keeps of the answer (the table's ``context`` or ``pruned`` curve)."""


class _Candidate(NamedTuple):
    """A plan the policy weighs, before it is chosen: plain figures, as the policy weighs some
    two dozen a plan."""

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
