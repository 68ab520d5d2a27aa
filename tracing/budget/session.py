"""One request's budget session: the one seam between the pipeline and the budget.

Each request opens a ``BudgetSession`` over the service's one ``BudgetEngine``. Every stage runs
through it (``run``; generation through ``generating``, for its stream): its span, its deadline,
its result, error and degradation, and its cost learned. Besides, the session decides:

* **feasibility** (``check_feasible``): a budget no plan can meet is refused before any work
  (504), a target whose queue has no room for it too (503), counted under the request's route;
* **how deep each search looks** (``search_depth``), **the keyword side** (``keyword_side``)
  and **the plan** (``plan``): rerank candidates, context and output tokens for what is left
  after search, the caller's own output cap kept, the context fitted to the target's context
  length, and the target: the first candidate whose smallest plan fits (a later one, a smaller
  model, is a degradation, said so);
* **the reservation** (``plan``, ``holding``): the generation time held at the target from
  the plan on, so that later requests plan around it and one may ask this one to stop early;
* **how long each stage may wait** (``deadline_for``, ``generation_reserve_ms``,
  ``attribution``), what the serving layer is told (``serving_need``), **what is learned**
  (``observe``, ``generation_ended``). It holds one request's state, for that request's task.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from tracing import metrics
from tracing.budget.engine import BudgetEngine, Rules
from tracing.budget.errors import BudgetInfeasible, QueueInfeasible, TargetSaturated
from tracing.budget.keyword_side import keyword_side
from tracing.budget.ledger import BudgetLedger, Outcome
from tracing.budget.policy import Action, Plan, PlanLimits, fit_context_length
from tracing.budget.queue import Reservation, TargetQueue
from tracing.budget.reserves import Attribution, attribution_room, generation_reserve_ms
from tracing.budget.serving import (
    GenerationResult,
    ReportedLoad,
    ServingNeed,
    ServingTargets,
    generation_ended,
    serving_need,
    target_queue,
)
from tracing.budget.stage_names import StageName


class BudgetSession:
    """One request's dealings with the budget engine; see the module docstring."""

    def __init__(
        self,
        engine: BudgetEngine,
        ledger: BudgetLedger,
        *,
        route: str,
        question: str | None = None,
        serving: ServingTargets | None = None,
        output_cap: int | None = None,
    ) -> None:
        """For an answer to ``question``: the targets ``serving`` may send it to (the preferred
        first), their loads and context length; for a search when ``question`` is None.
        ``output_cap`` is the caller's own cap on the answer."""
        self.engine = engine
        self.ledger = ledger
        self.route = route
        self.targets: list[str] = []
        """Where the answer may go, the preferred first (a smaller model next); a search: none."""
        self.loads: dict[str, ReportedLoad | None] = {}
        self.edf = False
        self.generation_waits = True
        """Whether generating waits on the model (else it is the request's own streaming)."""
        self.context_length: int | None = None
        if question is not None and serving is not None:
            self.targets = serving.cost_targets(question)
            self.loads = {target: serving.target_load(target) for target in self.targets}
            self.edf = serving.earliest_deadline_first  # its own queue (llama.cpp's worker)
            self.generation_waits = bool(getattr(serving, "generation_waits", True))
            self.context_length = serving.context_length
        self.output_cap = output_cap
        """The caller's own cap on the answer's tokens: kept, and not a degradation."""
        self._plan: Plan | None = None
        self.reservation: Reservation | None = None

    @property
    def planned(self) -> Plan:
        """The plan ``plan`` made (a ``RuntimeError`` before it)."""
        if self._plan is None:
            raise RuntimeError("the session has not planned yet")
        return self._plan

    @property
    def target(self) -> str:
        """The target the plan chose (the preferred one before planning)."""
        if self._plan is not None:
            return self._plan.target
        return self.targets[0] if self.targets else ""

    @property
    def rules(self) -> Rules:
        return self.engine.rules

    # -- admission -------------------------------------------------------------------------

    def check_feasible(self) -> None:
        """Refuse at once (``BudgetInfeasible``, ``TargetSaturated``) a budget that not even the
        smallest plan can meet at any candidate target, and a request the target's queue has no
        room for; before any of the request's work. A refusal for its own small budget is
        deliberate, anyone may send one, so it is counted apart from the errors."""
        rules = self.rules
        if not self.targets or not rules.degrade or rules.on_infeasible == "passages":
            return
        target = self._first_feasible_or_raise()
        try:
            self.engine.check_queue_room(
                self.ledger,
                target,
                self.queue(target),
                max_queued_per_slot=rules.max_queued_per_slot,
            )
        except TargetSaturated:
            metrics.ADMISSION_REFUSED.labels(route=self.route, reason="overloaded").inc()
            raise

    def _first_feasible_or_raise(self) -> str:
        last: BudgetInfeasible | None = None
        for target in self.targets:
            try:
                self.engine.check_feasible(self.ledger, target)
                return target
            except BudgetInfeasible as exc:
                last = exc
        metrics.ADMISSION_REFUSED.labels(route=self.route, reason="budget_infeasible").inc()
        assert last is not None
        raise last

    def queue(self, target: str) -> TargetQueue:
        """How ``target`` queues: its slots, order and others' load (``target_queue``)."""
        ours = self.engine.reservations.open(target)
        return target_queue(self.loads.get(target), edf=self.edf, ours=ours)

    # -- the plan --------------------------------------------------------------------------

    def keyword_side(self, *, k: int, rerank_available: bool) -> Action | None:
        """Whether hybrid search's keyword side runs (``keyword_side.keyword_side``): None when
        it does, else the action that drops it."""
        if not self.rules.degrade:
            return None
        target = self.targets[0] if self.targets else None
        queue = self.queue(target) if target is not None else None
        return keyword_side(
            self.engine, self.ledger, target, queue, k=k, rerank_available=rerank_available
        )

    def search_depth(self, *, k: int, rerank_available: bool) -> int:
        """How many passages each search finds for ``k``: as many as a plan may rerank."""
        return self._limits().rerank_pool(k) if rerank_available else k

    def _limits(self) -> PlanLimits:
        return (self.engine.answer_policy if self.targets else self.engine.search_policy).limits

    def plan(self, *, k: int, rerank_available: bool) -> Plan:
        """The plan for what is left of the budget (an answer's, or a search's when the engine
        was opened for one); kept (``planned``) for the stages that follow. An answer's time is
        held at its target at once: one planned next, while this one reranks, counts it."""
        engine, ledger, limits = self.engine, self.ledger, self._limits()
        answering = bool(self.targets)
        if not self.rules.degrade:
            plan = Plan(
                limits.rerank_candidates if rerank_available else 0,
                limits.context_tokens,
                limits.max_output_tokens,
                0.0,
                target=self.target,
            )
        elif not answering:
            plan = engine.plan_search(ledger, k=k, rerank_available=rerank_available)
        else:
            plan = self._plan_answer(k, rerank_available, limits)
        output_cap = self.output_cap
        if output_cap is not None and 0 < output_cap <= plan.max_output_tokens:
            # The caller wants no more than the budget allows: the budget capped nothing.
            actions = [a for a in plan.actions if a.action != "output_capped"]
            plan = replace(plan, max_output_tokens=output_cap, actions=actions)
        self._plan = plan
        if answering and plan.max_output_tokens > 0 and self.reservation is None:
            self.reservation = self.engine.reserve(plan, self.ledger)
        return plan

    def _plan_answer(self, k: int, rerank_available: bool, limits: PlanLimits) -> Plan:
        first: BudgetInfeasible | None = None
        for target in self.targets:
            try:
                plan = self.engine.plan_answer(
                    self.ledger,
                    k=k,
                    rerank_available=rerank_available,
                    target=target,
                    queue=self.queue(target),
                )
            except BudgetInfeasible as exc:
                first = first or exc
                continue
            if first is not None:  # the preferred target did not fit: a smaller model does
                reason = (
                    f"{target}: the smallest plan at {self.targets[0]} needs about "
                    f"{first.needed_ms:.0f} ms, {max(self.ledger.remaining_ms, 0.0):.0f} ms left"
                )
                plan = replace(
                    plan,
                    actions=[*plan.actions, Action(StageName.GENERATE, "smaller_model", reason)],
                )
            return fit_context_length(plan, limits, self.context_length)
        assert first is not None
        if self.rules.on_infeasible == "passages" and limits.max_output_tokens:
            self.ledger.degrade(StageName.GENERATE, "generation_skipped", str(first))
            return Plan(0, limits.context_tokens, 0, 0.0, target=self.targets[0])
        if isinstance(first, QueueInfeasible):  # alone it fits: refused before the engine
            metrics.ADMISSION_REFUSED.labels(route=self.route, reason="overloaded").inc()
            raise TargetSaturated(str(first)) from first
        raise first

    def begin(self, stage: StageName, span: Span, *, runs: bool = True) -> None:
        """As ``stage`` begins: its predicted ms on the ledger (when it ``runs``: a rerank of no
        passages does not), the plan's actions for it on its span, and at rerank the plan."""
        plan = self._plan
        if plan is None:
            return
        predicted = plan.stage_ms.get(stage.value)
        if stage is StageName.GENERATE and plan.stage_ms:
            predicted = plan.stage_ms.get("queue", 0.0) + plan.stage_ms[StageName.GENERATE]
        if stage is StageName.RERANK and not plan.rerank_candidates:
            runs = False
        if predicted is not None and runs:
            self.ledger.expect(stage.value, predicted)
        for action in plan.actions:
            if action.stage == stage.value:
                self.ledger.degrade(stage.value, action.action, action.reason, span)
        if stage is StageName.RERANK and span.is_recording():
            span.set_attributes(
                {
                    "ragtime.plan.rerank_candidates": plan.rerank_candidates,
                    "ragtime.plan.context_tokens": plan.context_tokens,
                    "ragtime.plan.context_pruned": plan.prune,
                    "ragtime.plan.first_token_ms": round(plan.first_token_ms, 3),
                    "ragtime.plan.max_output_tokens": plan.max_output_tokens,
                    "ragtime.plan.predicted_ms": round(plan.predicted_ms, 3),
                }
            )

    async def run(
        self,
        stage: StageName,
        work: Callable[[float], Awaitable[Outcome]],
        *,
        runs: bool = True,
        units: Callable[[Outcome], float] = lambda _: 1.0,
        spent_before_ms: float = 0.0,
    ) -> Outcome:
        """One stage through the budget, the one way every stage but generation runs: its span
        on the ledger, the plan's prediction and actions on it (``begin``; ``runs``: the stage
        does work), ``work`` given the stage's deadline (``deadline_for``), its result on the
        span, what it gave up as a degradation, its error on the span, and its cost over
        ``units`` taught to the cost model, with ``spent_before_ms`` (the answer filter's time
        while the answer streamed, charged here too). ``DeadlinePassed`` ends the request."""
        if spent_before_ms:
            self.ledger.charge(stage, spent_before_ms)
        with self.ledger.stage(stage) as span:
            self.begin(stage, span, runs=runs)
            started = time.perf_counter() - spent_before_ms / 1000.0
            result = await work(self.deadline_for(stage))
            result.record(span)
            if (error := getattr(result, "error", None)) is not None:
                span.record_exception(error)
            if (degradation := getattr(result, "degradation", None)) is not None:
                action, reason = degradation
                self.ledger.degrade(stage, action, reason, span)
            self.observe(stage, started, units(result))
        return result

    @contextmanager
    def generating(self, **attributes: AttributeValue) -> Iterator[Span]:
        """Generation's own entry, for its stream: its span (with ``attributes``) open while
        the answer streams, the plan's prediction and actions on it, ended with the error that
        ended the stream, if any."""
        stage = self.ledger.begin(StageName.GENERATE, **attributes)
        self.begin(StageName.GENERATE, stage.span)
        error: Exception | None = None
        try:
            yield stage.span
        except Exception as exc:
            error = exc
            raise
        finally:
            stage.end(error)

    @property
    def spent_ms(self) -> float:
        return self.ledger.spent_ms  # what the request has spent of its budget so far

    def skip(self, action: Action) -> None:
        """A stage the plan drops (``keyword_side``): its span, saying what was given up."""
        with self.ledger.stage(action.stage) as span:
            self.ledger.degrade(action.stage, action.action, action.reason, span)

    # -- the reservation -------------------------------------------------------------------

    def release_reservation(self) -> None:
        """Give the held time back (``holding`` does, and a request that ends before it)."""
        if self.reservation is not None:
            self.reservation.release()

    @contextmanager
    def holding(self) -> Iterator[None]:
        """The generation, started at its target's queue; the reservation released after. The
        request's admission ticket is out of the process's own work meanwhile, when generating
        waits on the model."""
        ticket = self.ledger.ticket if self.generation_waits else None
        if ticket is not None:
            ticket.generation_started()
        try:
            if self.reservation is not None:
                self.reservation.start()
            yield
        finally:
            self.release_reservation()
            if ticket is not None:
                ticket.generation_ended()

    def stop_at(self) -> float | None:
        """When a request queued behind this one needs the time: stop decoding by then."""
        return self.reservation.stop_at if self.reservation is not None else None

    def first_token(self) -> None:
        """The answer's first token came: its wait at the target is over."""
        if self.reservation is not None:
            self.reservation.first_token()

    # -- how long each stage may wait --------------------------------------------------------

    def deadline_for(self, stage: StageName) -> float:
        """Until when ``stage`` may run (a ``time.perf_counter()`` value): the request's deadline,
        less what the plan's later stages need after rerank."""
        deadline = self.ledger.deadline
        plan = self._plan
        if stage is StageName.RERANK and plan is not None:
            rest_ms = plan.predicted_ms - self.engine.cost.predict(
                StageName.RERANK, plan.rerank_candidates
            )
            return deadline - max(rest_ms, 0.0) / 1000.0
        return deadline

    def generation_reserve_ms(self) -> float:
        """Kept before the deadline while decoding (``reserves.generation_reserve_ms``)."""
        return generation_reserve_ms(self.engine)

    def serving_need(self) -> ServingNeed:
        """What the plan needs of the serving layer (``serving_need``)."""
        return serving_need(self.engine, self.ledger, self.planned)

    def attribution(self) -> Attribution:
        """Whether attribution fits what is left, and until when it may run."""
        return attribution_room(self.engine, self.ledger)

    # -- what is learned -------------------------------------------------------------------

    def observe(self, stage: StageName, started: float, units: float = 1.0) -> None:
        """``stage`` ran from ``started`` (a ``time.perf_counter()`` value) until now, over
        ``units`` (queries, candidate pairs, answers)."""
        if units > 0:
            self.observe_ms(stage, (time.perf_counter() - started) * 1000.0, units)

    def observe_ms(self, stage: StageName, elapsed_ms: float, units: float = 1.0) -> None:
        self.engine.observe_stage(stage.value, elapsed_ms, units)

    def routed(self, target: str, degradation: tuple[str, str] | None, span: Span) -> None:
        """Where the request went (``target``), and what the backend gave up to send it there
        (its output capped to the server's context length, say)."""
        if span.is_recording():
            span.set_attribute("ragtime.budget.target", target)
        if degradation is not None:
            self.ledger.degrade(StageName.GENERATE, *degradation, span)

    def generation_ended(
        self, generated: GenerationResult, span: Span, *, shared_prefix_tokens: int | None
    ) -> None:
        """How generation ended (``serving.generation_ended``); its timings are not learned
        where a request due earlier may have preempted it (``Reservation.overtaken``)."""
        res = self.reservation
        learn = res is None or not (self.queue(res.target).preemptive and res.overtaken())
        generation_ended(self.engine, self.ledger, generated, span, learn=learn,
                         shared_prefix_tokens=shared_prefix_tokens)  # fmt: skip
