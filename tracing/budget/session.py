"""One request's budget session: the one seam between the pipeline and the budget.

Each request opens a ``BudgetSession`` over the service's one ``BudgetEngine`` as it arrives.
The app uses five of its members, and nothing else of the budget:

* ``run(stage, inputs)``: every stage but generation, auth first (``tracing.budget.stage``):
  its span and allocation (``reserved_ms``), its ``Allowance`` (its deadline, how deep a search
  looks, the plan once made, whether an optional stage fits), its result, error and degradation
  on the span, its cost learned (auth's span waits for its budget: ``BudgetLedger.set_budget``);
* ``ask``: what the request asks (``k`` passages; for an answer, its question and targets),
  then its admission (``check_feasible``): a budget no plan can meet is refused before any work
  (504) unless the answer may come from the passages, a target with no queue room too (503);
* ``keeps(stage)``: whether the plan keeps a stage it may drop (hybrid search's keyword side,
  priced by ``keyword_side``); a dropped one gets a span saying what was given up;
* ``plan()``: rerank candidates, context and output tokens for what is left after search (the
  caller's cap kept, the context fitted to the target's), and the target: the first whose
  smallest plan fits (a smaller model is a degradation). The answer's generation time is held
  at its target from then on (the reservation), so that later requests plan around it;
* ``generate(stage, inputs)``: the answer's stream (``tracing.budget.generation``), at the
  target's queue, with what it is told and what is learned from it.
Leaving the session (a context manager) gives the reservation back, whatever ended the request.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TypeVar

from opentelemetry.trace import Span

import tracing.budget.allowances as allowances
from tracing import metrics
from tracing.budget.engine import BudgetEngine, Rules
from tracing.budget.errors import BudgetInfeasible, QueueInfeasible, TargetSaturated
from tracing.budget.generation import Generation
from tracing.budget.keyword_side import keyword_side
from tracing.budget.ledger import BudgetLedger, StageOutcome
from tracing.budget.plan import Action, Plan, PlanLimits, fit_context_length
from tracing.budget.queue import Reservation, TargetQueue
from tracing.budget.serving import ReportedLoad, ServingTargets, target_queue
from tracing.budget.stage import Stage, StreamingStage
from tracing.budget.stage_names import StageName

Inputs = TypeVar("Inputs")
Result = TypeVar("Result", bound=StageOutcome)


class BudgetSession:
    """One request's dealings with the budget engine; see the module docstring."""

    def __init__(
        self,
        engine: BudgetEngine,
        ledger: BudgetLedger,
        *,
        route: str,
        k: int = 0,
        rerank_available: bool = False,
        question: str | None = None,
        serving: ServingTargets | None = None,
        output_cap: int | None = None,
    ) -> None:
        """A request's session from its arrival (its auth stage runs through it before its
        question is read); what it asks (as ``ask`` takes it) may be given at once."""
        self.engine = engine
        self.ledger = ledger
        self.route = route
        self._plan: Plan | None = None
        self.reservation: Reservation | None = None
        self._asks(k, rerank_available, question, serving, output_cap, False)

    def ask(
        self,
        *,
        k: int,
        rerank_available: bool,
        question: str | None = None,
        serving: ServingTargets | None = None,
        output_cap: int | None = None,
        extract_instead: bool = False,
    ) -> None:
        """What the request asks, once it is read, then its admission (``check_feasible``):
        ``k`` passages (reranked when ``rerank_available``) and, for an answer to ``question``,
        the targets ``serving`` may send it to (the preferred first), their loads and context
        length; a search when ``question`` is None; ``output_cap``, the caller's cap. With
        ``extract_instead``, a budget too small for generation is answered from the passages (a
        plan of no tokens, said so), not refused; with no ``serving`` too, always."""
        self._asks(k, rerank_available, question, serving, output_cap, extract_instead)
        self.check_feasible()

    def _asks(
        self,
        k: int,
        rerank_available: bool,
        question: str | None,
        serving: ServingTargets | None,
        output_cap: int | None,
        extract_instead: bool,
    ) -> None:
        self.k = k
        self.rerank_available = rerank_available
        self.targets: list[str] = []
        """Where the answer may go, the preferred first (a smaller model next); a search: none."""
        self.loads: dict[str, ReportedLoad | None] = {}
        self.edf = False
        self.generation_waits = True  # on the model (else on the request's own streaming)
        self.context_length: int | None = None
        if question is not None and serving is not None:
            self.targets = serving.cost_targets(question)
            self.loads = {target: serving.target_load(target) for target in self.targets}
            self.edf = serving.earliest_deadline_first  # its own queue (llama.cpp's worker)
            self.generation_waits = bool(getattr(serving, "generation_waits", True))
            self.context_length = serving.context_length
        self.output_cap = output_cap  # the caller's own: kept, and not a degradation
        self.extract_instead = extract_instead
        answering = bool(self.targets) or extract_instead
        self._least = allowances.least_to_come(self.engine, self._limits(), self.targets, answering)

    def __enter__(self) -> BudgetSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """The request's generation time given back to its target: the one place it is."""
        if self.reservation is not None:
            self.reservation.release()

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

    def check_feasible(self) -> None:
        """Refuse at once (``BudgetInfeasible``, ``TargetSaturated``) a budget that not even the
        smallest plan can meet at any candidate target (unless it may go without generation),
        and a request the target's queue has no room for; before any of the request's work. A
        refusal for its own small budget is deliberate, anyone may send one, so it is counted
        apart from the errors."""
        rules = self.rules
        if not self.targets or not rules.degrade or rules.on_infeasible == "passages":
            return
        target = self._first_feasible(raising=not self.extract_instead)
        if target is None:
            return  # answered from the passages: no target's queue is asked
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

    def _first_feasible(self, *, raising: bool) -> str | None:
        """The first target whose smallest plan fits; none (or, ``raising``, the refusal)."""
        last = None
        for target in self.targets:
            try:
                self.engine.check_feasible(self.ledger, target)
                return target
            except BudgetInfeasible as exc:
                last = exc
        if not raising:
            return None
        metrics.ADMISSION_REFUSED.labels(route=self.route, reason="budget_infeasible").inc()
        assert last is not None
        raise last

    def queue(self, target: str) -> TargetQueue:
        """How ``target`` queues: its slots, order and others' load (``target_queue``)."""
        ours = self.engine.reservations.open(target)
        return target_queue(self.loads.get(target), edf=self.edf, ours=ours)

    async def run(self, stage: Stage[Inputs, Result], inputs: Inputs) -> Result:
        """One stage through the budget, the way every stage but generation runs: its span
        on the ledger, the plan's actions for it on the span, ``stage.run(inputs, allowance)``,
        its result on the span, what it gave up as a degradation, its error on the span, the
        plan's prediction compared and its cost taught to the cost model over its ``units``
        (``tracing.budget.stage``). ``DeadlinePassed`` ends the request."""
        name, clock = stage.name, self.ledger.clock
        with self.ledger.stage(name, reserved_ms=self.reserved_ms(name)) as span:
            self._begin(name, span)
            started = clock()
            result = await stage.run(inputs, self._allowance(name))
            result.record(span)
            if (error := getattr(result, "error", None)) is not None:
                span.record_exception(error)
            if (degradation := getattr(result, "degradation", None)) is not None:
                action, reason = degradation
                self.ledger.degrade(name, action, reason, span)
            if earlier_ms := getattr(result, "earlier_ms", 0.0):
                started -= earlier_ms / 1000.0
                self.ledger.charge(name, earlier_ms, started=started)
            units = float(getattr(result, "units", 1.0))
            if units > 0:
                self._expect(name)
                self.engine.observe_stage(name.value, (clock() - started) * 1000.0, units)
        return result

    def keeps(self, stage: Stage[Inputs, Result]) -> bool:
        """Whether the plan keeps ``stage``, which it may drop to keep more of the answer's
        quality (hybrid search's keyword side: ``keyword_side``); a dropped one gets its span."""
        if stage.name is not StageName.KEYWORD or not self.rules.degrade:
            return True
        target = self.targets[0] if self.targets else None
        queue = self.queue(target) if target is not None else None
        dropped = keyword_side(
            self.engine,
            self.ledger,
            target,
            queue,
            k=self.k,
            rerank_available=self.rerank_available,
        )
        if dropped is None:
            return True
        with self.ledger.stage(dropped.stage, reserved_ms=self.reserved_ms(stage.name)) as span:
            self.ledger.degrade(dropped.stage, dropped.action, dropped.reason, span)
        return False

    @asynccontextmanager
    async def generate(
        self, stage: StreamingStage[Inputs], inputs: Inputs
    ) -> AsyncIterator[Generation]:
        """The answer's generation (``tracing.budget.generation``), started at its target's
        queue: its span open until the block ends (the answer's moderation with it), the plan's
        prediction and actions on it, ended with the error that ended the block, if any. The
        request's admission ticket is out of the process's own work meanwhile, when generating
        waits on the model."""
        plan = self.planned
        reserved_ms = self.reserved_ms(StageName.GENERATE)
        attributes = stage.span_attributes(plan.max_output_tokens)
        stage_span = self.ledger.begin(StageName.GENERATE, reserved_ms=reserved_ms, **attributes)
        self._begin(StageName.GENERATE, stage_span.span)
        ticket = self.ledger.ticket if self.generation_waits else None
        if ticket is not None:
            ticket.generation_started()
        if self.reservation is not None:
            self.reservation.start()
        error: Exception | None = None
        reservation, span = self.reservation, stage_span.span
        try:
            deadline = self.deadline_for(StageName.GENERATE)
            allowance = allowances.generation_allowance(
                self.engine, self.ledger, plan, reservation, deadline=deadline, span=span
            )
            preemptive = reservation is not None and self.queue(reservation.target).preemptive
            events = stage.run(inputs, allowance)
            generation = Generation(
                self.engine, self.ledger, reservation, events, span, preemptive=preemptive
            )
            try:
                yield generation
            finally:
                await generation.aclose()
        except Exception as exc:
            error = exc
            raise
        finally:
            stage_span.end(error)
            if ticket is not None:
                ticket.generation_ended()

    # -- the plan --------------------------------------------------------------------------

    def plan(self) -> Plan:
        """The plan for what is left of the budget (an answer's, or a search's when the engine
        was opened for one); kept (``planned``) for the stages that follow. An answer's time is
        held at its target at once: one planned next, while this one reranks, counts it."""
        engine, ledger, limits = self.engine, self.ledger, self._limits()
        k, rerank_available = self.k, self.rerank_available
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
            if self.extract_instead:  # answered from the passages a prompt would hold
                plan = replace(plan, context_tokens=engine.answer_policy.limits.context_tokens)
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

    def _limits(self) -> PlanLimits:
        return (self.engine.answer_policy if self.targets else self.engine.search_policy).limits

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
        if (self.extract_instead or self.rules.on_infeasible == "passages") and (
            limits.max_output_tokens
        ):
            action = "extracted" if self.extract_instead else "generation_skipped"
            self.ledger.degrade(StageName.GENERATE, action, str(first))
            return Plan(0, limits.context_tokens, 0, 0.0, target=self.targets[0])
        if isinstance(first, QueueInfeasible):  # alone it fits: refused before the engine
            metrics.ADMISSION_REFUSED.labels(route=self.route, reason="overloaded").inc()
            raise TargetSaturated(str(first)) from first
        raise first

    def _begin(self, stage: StageName, span: Span) -> None:
        """As ``stage`` begins: the plan's actions for it on its span, and at rerank the plan;
        for generation, its predicted ms on the ledger (for the others, ``_expect`` once they
        have done work: a rerank of no candidates predicts nothing)."""
        plan = self._plan
        if plan is None:
            return
        if stage is StageName.GENERATE:
            self._expect(stage)
        for action in plan.actions:
            if action.stage == stage.value:
                self.ledger.degrade(stage.value, action.action, action.reason, span)
        if stage is StageName.RERANK and span.is_recording():
            span.set_attributes(plan.attributes())

    def _expect(self, stage: StageName) -> None:
        """The plan's prediction for ``stage`` on the ledger, compared when its span ends."""
        plan = self._plan
        if plan is None or (stage is StageName.RERANK and not plan.rerank_candidates):
            return
        predicted = plan.stage_ms.get(stage.value)
        if stage is StageName.GENERATE and plan.stage_ms:
            predicted = plan.generation_ms
        if predicted is not None:
            self.ledger.expect(stage.value, predicted)

    # -- how long each stage may wait --------------------------------------------------------

    def _allowance(self, stage: StageName) -> allowances.Allowance:
        limits = self._limits()
        depth = limits.rerank_pool(self.k) if self.rerank_available else self.k
        return allowances.Allowance(
            deadline=self.deadline_for(stage),
            depth=depth,
            plan=self._plan,
            room=functools.partial(allowances.stage_room, self.engine, self.ledger, stage),
        )

    def reserved_ms(self, stage: StageName) -> float:
        """What the stages after ``stage`` are reserved as it starts (``reserved_after``; before
        the plan, of what admission counts on, read once for what the request asks)."""
        return allowances.reserved_after(
            self.ledger, self._plan, stage, self._limits(), self._least
        )

    def deadline_for(self, stage: StageName) -> float:
        """Until when ``stage`` may run (``allowances.stage_deadline``)."""
        return allowances.stage_deadline(self.engine, self.ledger, self._plan, stage)
