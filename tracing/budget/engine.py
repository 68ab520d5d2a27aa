"""The budget engine: what every request's budget session plans with.

It holds the cost model, the policies for answers and searches, the reservations that model
contention, the calibrator and the service's rules. The pipeline opens one session per request
(``tracing.budget.session``) and asks it, never the engine's parts; the engine
publishes its current costs as metrics and keeps remote targets calibrated (``maintain``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from tracing import metrics
from tracing.budget.calibration import Calibrator, Probe
from tracing.budget.cost_model import CostModel
from tracing.budget.errors import BudgetInfeasible, QueueInfeasible, TargetSaturated
from tracing.budget.ledger import BudgetLedger
from tracing.budget.plan import FirstTokenTarget, Plan, PlanLimits
from tracing.budget.policy import DegradationPolicy
from tracing.budget.quality import QualityTable
from tracing.budget.queue import Reservation, Reservations, TargetQueue, Wait
from tracing.budget.stage_names import StageName

log = logging.getLogger(__name__)

#: When a request ahead is cut short for a newcomer, the share of the newcomer's slack (its
#: time left beyond its own smallest plan) that the one ahead may still take.
SHARE_OF_SLACK = 0.6


@dataclass(frozen=True)
class Rules:
    """How the engine treats every request: the service's settings for the budget."""

    degrade: bool = True
    """Plan to the budget (the degradation policy); False runs every request at full size."""
    on_infeasible: str = "fail"
    """``fail`` (504) or ``passages`` (answer with the passages alone, no generation)."""
    max_queued_per_slot: int = 64
    """Answers that may wait per decoding slot of a target before it refuses more (503)."""


class BudgetEngine:
    def __init__(
        self,
        answer_limits: PlanLimits,
        search_limits: PlanLimits,
        *,
        quality: QualityTable,
        cost: CostModel,
        rules: Rules | None = None,
        loop_lag_ms: Callable[[], float] = lambda: 0.0,
        target_models: Callable[[str], str | None] | None = None,
    ) -> None:
        """``cost`` is the process's one cost model (``app.pipeline.budget_engine.cost_model``),
        which the engine reads and teaches, never a second of its own. ``quality``: the
        default table and, in its ``models``, each model's own; ``target_models``: the model
        a target serves (``GenerationBackend.target_model``), where its name does not say."""
        self.cost = cost
        self.rules = rules or Rules()
        self.quality = quality
        self.target_models = target_models
        self.answer_policy = DegradationPolicy(self.cost, answer_limits, quality)
        self.search_policy = DegradationPolicy(self.cost, search_limits, quality)
        self.reservations = Reservations()
        self.calibrator = Calibrator(self.cost)
        self.loop_lag_ms = loop_lag_ms
        """The serving event loop's recent lag (``tracing.loop_lag``; none where no loop
        serves): an answer keeps that much more in reserve before its deadline."""

    def set_prompt_overhead(self, tokens: int) -> None:
        """What an answer's prompt holds besides its passages (system prompt, template,
        question), as measured, instead of ``PlanLimits``' assumed 120 tokens."""
        policy = self.answer_policy
        policy.limits = replace(policy.limits, prompt_overhead_tokens=max(int(tokens), 0))

    def set_target_models(self, target_models: Callable[[str], str | None]) -> None:
        """Which model each target serves, as the started backend knows it: the quality table
        each target's plans are weighed with follows it."""
        self.target_models = target_models

    def quality_for(self, target: str | None) -> QualityTable:
        """The quality table of the model ``target`` serves (the default one for a search's
        plan, which has no target, and for a model the table has no curves for)."""
        if target is None:
            return self.quality
        model = self.target_models(target) if self.target_models is not None else None
        return self.quality.for_target(target, model)

    def plan_answer(
        self,
        ledger: BudgetLedger,
        *,
        k: int,
        rerank_available: bool,
        target: str,
        queue: TargetQueue | None = None,
    ) -> Plan:
        """The best plan for an answer from ``target`` in what is left of ``ledger``'s budget;
        raises ``BudgetInfeasible`` when not even the smallest fits."""
        queue = queue or TargetQueue()
        wait = self._queue_wait(target, ledger, queue)
        try:
            return self.answer_policy.plan(
                ledger.remaining_ms,
                k=k,
                rerank_available=rerank_available,
                target=target,
                queue_ms=wait.ms,
                ttft=self._first_token(ledger),
                quality=self.quality_for(target),
            )
        except BudgetInfeasible as exc:
            alone_ms = exc.needed_ms - wait.ms  # the smallest plan with no queue
            if alone_ms > ledger.remaining_ms:  # its cost alone does not fit
                self.cost.observe_refusal(target, (StageName.MODERATE_ANSWER,))
                raise
            shared = self._share(ledger, wait, alone_ms, queue, target)
            if shared is None:
                raise QueueInfeasible(
                    exc.needed_ms, ledger.remaining_ms, wait_ms=wait.ms, target=target
                ) from exc
            queue_ms, ahead = shared
            plan = self.answer_policy.plan(
                ledger.remaining_ms,
                k=k,
                rerank_available=rerank_available,
                target=target,
                queue_ms=queue_ms,
                ttft=self._first_token(ledger),
                quality=self.quality_for(target),
            )
            ahead.ask_to_stop(time.perf_counter() + queue_ms / 1000.0)
            return plan

    def _first_token(
        self, ledger: BudgetLedger, spend_first_ms: float = 0.0
    ) -> FirstTokenTarget | None:
        """The time-to-first-token target ``ledger``'s request is planned for, and what it
        leaves once ``spend_first_ms`` more are spent: the caller's own, else the service's;
        None when neither asks for one (the budget alone decides)."""
        if ledger.ttft_target_ms is not None:
            ms, whose = ledger.ttft_target_ms, "the request's"
        elif self.answer_policy.limits.ttft_target_ms is not None:
            ms, whose = self.answer_policy.limits.ttft_target_ms, "the service's"
        else:
            return None
        return FirstTokenTarget(ms - ledger.spent_ms - spend_first_ms, ms, whose)

    def _queue_wait(self, target: str, ledger: BudgetLedger, queue: TargetQueue) -> Wait:
        """The wait ahead at ``target`` for a request due at ``ledger``'s deadline: our own
        reservations, and the server's other queued requests at a full answer's cost each."""
        lim = self.answer_policy.limits
        typical_ms = self.cost.generation(target).service_ms(
            lim.context_tokens + lim.prompt_overhead_tokens, lim.max_output_tokens
        )
        return self.reservations.wait(
            target,
            ledger.deadline,
            slots=queue.slots,
            edf=queue.edf,
            preemptive=queue.preemptive,
            external=queue.external,
            external_ms=typical_ms,
        )

    def _share(
        self, ledger: BudgetLedger, wait: Wait, alone_ms: float, queue: TargetQueue, target: str
    ) -> tuple[float, Reservation] | None:
        """A shorter wait behind the one request ahead, and that request, when cutting it short
        lets this one fit; ``None`` when it cannot (more than one ahead, another's load)."""
        if queue.slots != 1 or queue.external or len(wait.reservations) != 1:
            return None
        ahead = wait.reservations[0]
        now = time.perf_counter()
        least_ms = self.smallest_generation_ms(target)
        begun = ahead.started if ahead.started is not None else now
        floor_ms = max((begun - now) * 1000.0 + least_ms, 0.0)  # the one ahead gets its least
        tolerable_ms = ledger.remaining_ms - alone_ms
        queue_ms = max(SHARE_OF_SLACK * tolerable_ms, floor_ms)
        return (queue_ms, ahead) if queue_ms <= tolerable_ms else None

    def check_feasible(self, ledger: BudgetLedger, target: str) -> None:
        """Raise ``BudgetInfeasible`` at once when not even the smallest answer plan, with the
        stages before it, can fit what is left: before any of the request's work is done.

        Judged at the median, not the planning quantile: a refusal teaches the model nothing,
        so this check must not refuse on a pessimistic tail (one slow burst would lock it in);
        the plan after search decides at the quantile, with fresh figures."""
        smallest = self.plan_bounds(target, quantile=0.5)["smallest_ms"]
        if smallest > ledger.remaining_ms:
            self.cost.observe_refusal(
                target, (StageName.EMBED, StageName.SEARCH, StageName.MODERATE_ANSWER)
            )
            raise BudgetInfeasible(smallest, ledger.remaining_ms)

    def check_queue_room(
        self, ledger: BudgetLedger, target: str, queue: TargetQueue, *, max_queued_per_slot: int
    ) -> None:
        """Raise ``TargetSaturated`` at arrival when ``target`` already holds its slots and
        ``max_queued_per_slot`` waiting answers per slot ahead of this one (on a target serving
        by deadline, only those it would wait behind), or when the wait its reservations
        predict leaves no room for even the smallest answer (judged at the median, as
        ``check_feasible``). A single answer ahead on a single slot never refuses: the plan may
        ask it to stop early (``_share``)."""
        wait = self._queue_wait(target, ledger, queue)
        held = wait.ahead if queue.edf else self.reservations.open(target) + max(queue.external, 0)
        limit = max(queue.slots, 1) * (1 + max_queued_per_slot)
        if held >= limit:
            raise TargetSaturated(f"{held} answers are queued at {target} (at most {limit})")
        if wait.ms <= 0 or (queue.slots == 1 and wait.ahead == 1 and not queue.external):
            return
        smallest = self.plan_bounds(target, quantile=0.5)["smallest_ms"]
        if wait.ms + smallest > ledger.remaining_ms:
            raise TargetSaturated(
                f"the queue at {target} is {wait.ms:.0f} ms long; the smallest answer takes "
                f"{smallest:.0f} ms more, and {ledger.remaining_ms:.0f} ms are left"
            )

    def plan_quality(
        self,
        ledger: BudgetLedger,
        *,
        spend_first_ms: float,
        k: int,
        rerank_available: bool,
        target: str | None,
        queue: TargetQueue | None = None,
    ) -> float | None:
        """The quality of the best plan (an answer's at ``target``, a search's without one)
        left once ``spend_first_ms`` more are spent before it; None when none would fit. It
        decides nothing, holds nothing and asks nobody to stop."""
        remaining_ms = ledger.remaining_ms - spend_first_ms
        try:
            if target is None:
                policy = self.search_policy
                return policy.plan(remaining_ms, k=k, rerank_available=rerank_available).quality
            wait = self._queue_wait(target, ledger, queue or TargetQueue())
            return self.answer_policy.plan(
                remaining_ms,
                k=k,
                rerank_available=rerank_available,
                target=target,
                queue_ms=wait.ms,
                ttft=self._first_token(ledger, spend_first_ms),
                quality=self.quality_for(target),
            ).quality
        except BudgetInfeasible:
            return None

    def full_plan_fits(
        self,
        ledger: BudgetLedger,
        target: str,
        queue: TargetQueue | None,
        *,
        k: int,
        rerank_available: bool,
        spend_first_ms: float,
    ) -> bool:
        """Whether the full answer plan at ``target`` (every candidate reranked, the whole
        context, every output token), after its queue wait, fits what is left once
        ``spend_first_ms`` more are spent: predicted as the policy predicts it, without weighing
        the plans below it."""
        lim = self.answer_policy.limits
        wait = self._queue_wait(target, ledger, queue or TargetQueue())
        candidates = lim.rerank_pool(k) if rerank_available else 0
        full_ms = (
            self.cost.predict(StageName.RERANK, candidates)
            + wait.ms
            + self.cost.generation(target)
            .estimate()
            .service_ms(lim.context_tokens + lim.prompt_overhead_tokens, lim.max_output_tokens)
            + lim.reserve_ms
        )
        return full_ms <= ledger.remaining_ms - spend_first_ms

    def plan_search(self, ledger: BudgetLedger, *, k: int, rerank_available: bool) -> Plan:
        return self.search_policy.plan(ledger.remaining_ms, k=k, rerank_available=rerank_available)

    def reserve(self, plan: Plan, ledger: BudgetLedger) -> Reservation:
        """Hold ``plan``'s generation time at its target until released."""
        return self.reservations.reserve(
            plan.target, ledger.deadline, plan.stage_ms.get(StageName.GENERATE, 0.0)
        )

    def observe_stage(self, stage: str, elapsed_ms: float, units: float) -> None:
        self.cost.observe(stage, elapsed_ms, units)

    def observe_generation(
        self,
        target: str,
        *,
        prompt_tokens: int,
        cached_tokens: int,
        ttft_ms: float | None,
        output_tokens: int,
        decode_ms: float | None,
        shared_prefix_tokens: int | None = None,
    ) -> None:
        """Learn from one request's generation at ``target`` (times exclude our queue).

        ``shared_prefix_tokens``: the prompt prefix every request shares (system prompt and
        template). Only that much of what was cached counts toward what the next request may
        expect cached: a repeated question is served whole from the cache, a new one is not.
        """
        gen = self.cost.generation(target)
        expectable = cached_tokens
        if shared_prefix_tokens is not None:
            expectable = min(cached_tokens, shared_prefix_tokens)
        gen.observe_cache(prompt_tokens, expectable)
        if ttft_ms is not None:
            gen.observe_first_token(prompt_tokens - cached_tokens, ttft_ms)
        if decode_ms is not None and output_tokens > 1:
            gen.observe_decode(output_tokens - 1, decode_ms)

    def observe_cut_first_token(self, target: str, prompt_tokens: int, ttft_ms: float) -> None:
        """The first token of an answer cut short, which reports no usage: its uncached tokens
        are taken to be what a plan counts on (the prompt less the prefix recent requests found
        cached), so that the line learns what such a plan's first token took."""
        gen = self.cost.generation(target)
        cached = gen.estimate().cached_prefix_tokens
        gen.observe_first_token(max(round(prompt_tokens - cached), 1), ttft_ms)

    def publish(self) -> None:
        """Set the ``ragtime_cost_model`` gauges to the current costs."""
        for target in self.cost.targets():
            gen = self.cost.generation(target)
            fixed, slope = gen.line()
            metrics.COST_MODEL.labels(target=target, term="fixed_ms").set(fixed)
            metrics.COST_MODEL.labels(target=target, term="prefill_ms_per_token").set(slope)
            metrics.COST_MODEL.labels(target=target, term="decode_ms_per_token").set(
                gen.decode_ms_per_token()
            )
        for stage in (
            StageName.EMBED,
            StageName.SEARCH,
            StageName.RERANK,
            StageName.MODERATE_ANSWER,
        ):
            metrics.COST_MODEL.labels(target=stage, term="ms_per_unit").set(self.cost.rate(stage))

    async def maintain(
        self,
        probes: Callable[[], Mapping[str, Probe]],
        *,
        interval_s: float,
        itl_ms: Callable[[str], float | None] | None = None,
    ) -> None:
        """In the background until cancelled: calibrate targets as they join, learn what they
        report, and publish the costs as metrics, every ``interval_s``."""
        while True:
            try:
                await self.calibrator.sync(probes(), itl_ms)
                self.publish()
            except Exception:  # the maintainer must outlive any one failure
                log.exception("budget engine upkeep failed")
            await asyncio.sleep(interval_s)

    def smallest_generation_ms(self, target: str, quantile: float | None = None) -> float:
        """Predicted generation time of the smallest plan at ``target`` (no queue)."""
        lim = self.answer_policy.limits
        return (
            self.cost.generation(target)
            .estimate(quantile)
            .service_ms(lim.min_context_tokens + lim.prompt_overhead_tokens, lim.min_output_tokens)
        )

    def plan_bounds(self, target: str, quantile: float | None = None) -> dict[str, float]:
        """Predicted ms of the smallest and the full answer plan at ``target``, with no queue,
        counting the stages before planning (embed, search) and answer moderation."""
        lim = self.answer_policy.limits
        est = self.cost.generation(target).estimate(quantile)
        around = sum(
            self.cost.stage(s).rate(quantile)
            for s in (StageName.EMBED, StageName.SEARCH, StageName.MODERATE_ANSWER)
        )
        smallest = self.smallest_generation_ms(target, quantile) + lim.reserve_ms
        full = (
            self.cost.stage(StageName.RERANK).rate(quantile) * lim.rerank_candidates
            + est.service_ms(lim.context_tokens + lim.prompt_overhead_tokens, lim.max_output_tokens)
            + lim.reserve_ms
        )
        return {"smallest_ms": round(smallest + around, 1), "full_ms": round(full + around, 1)}

    def snapshot(self) -> dict[str, object]:
        snap = self.cost.snapshot()
        snap["plans"] = {target: self.plan_bounds(target) for target in self.cost.targets()}
        snap["calibration"] = {
            "calibrated": {t: p.__dict__ for t, p in self.calibrator.calibrated.items()},
            "failures": dict(self.calibrator.failures),
        }
        snap["quality"] = self.quality.as_json()
        return snap
