"""The request pipeline: the stages of one question (``app.stages``), in order, each in its span
and charged to the request's budget.

moderate.question -> embed -> search -> (plan) -> rerank -> moderate.passages (passages that
carry instructions for the model are quarantined) -> assemble -> generate (the answer filtered as
it streams) -> moderate.answer -> attribute (which passages the final answer cites: its own
``[n]`` labels, else its sentences attributed by similarity; skipped, and said so, when the
budget has no time left for it). Retrieval-only requests stop after rerank.

After search, the budget engine (``tracing.budget``) sizes the rest of the request to what is
left of its budget, for the target that will serve it and its place in that target's queue
(rerank candidates, context tokens, output tokens), or fails fast when nothing fits. A stage
that fails other than generation (a reranker error) is skipped as a degradation. Each stage is
waited for no longer than the budget allows; generation stops at the deadline. Every stage's
cost goes back to the engine's cost model. The pipeline holds no per-request state: a request's
state is its ``BudgetLedger``, its ``Prepared`` and the ``AnswerOutcome`` it is given back.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Awaitable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import TypeVar

from opentelemetry.trace import Span

from app.config import Settings
from app.errors import BudgetExhausted, Overloaded
from app.moderation import AnswerFilter
from app.services import Services
from app.stages import Attributed, Generated, ModeratedTail, Quarantined
from inference import (
    AssembledPrompt,
    BackendUnavailable,
    RouteDecision,
    Usage,
)
from retrieval import Passage, SearchFilter
from tracing import metrics as tracing_metrics
from tracing.budget import (
    DEFAULT_QUALITY_PATH,
    Action,
    BudgetEngine,
    BudgetInfeasible,
    BudgetLedger,
    DeadlinePassed,
    Learning,
    Plan,
    PlanLimits,
    QualityTable,
    Reservation,
    TargetQueue,
    TargetSaturated,
)

_FINISH_RESERVE_MS = 50.0
T = TypeVar("T")


@dataclass
class Prepared:
    """A question ready for generation: its passages, the plan, and the prompt."""

    question: str
    passages: list[Passage]
    prompt: AssembledPrompt
    plan: Plan
    with_answer: bool = True
    """False when the budget allowed only the passages (``on_infeasible = "passages"``)."""
    reservation: Reservation | None = None
    """The generation time held at the target; released when generation ends."""
    quarantined: list[Quarantined] = field(default_factory=list)
    """Retrieved passages kept out of the prompt: they carried instructions for the model."""


@dataclass
class AnswerOutcome:
    """How an answer ended: built by ``Pipeline.generate`` and delivered in its ``AnswerDone``."""

    text: str = ""  # the moderated answer, as sent
    usage: Usage | None = None
    finish_reason: str = "unknown"
    ttft_ms: float | None = None
    redactions: dict[str, int] = field(default_factory=dict)
    attribution: Attributed | None = None
    """The passages the answer cites and how that was found (the attribute stage)."""


@dataclass(frozen=True)
class AnswerDelta:
    """Moderated answer text, as it may be sent."""

    text: str


@dataclass(frozen=True)
class AnswerDone:
    """The last event of an answer: how it ended, its usage, its text as sent."""

    outcome: AnswerOutcome


AnswerEvent = AnswerDelta | AnswerDone


def build_budget_engine(settings: Settings) -> BudgetEngine:
    """The budget engine for these settings: plan limits, learning, the quality table."""
    s = settings
    return BudgetEngine(
        PlanLimits(
            rerank_candidates=s.rerank_candidates,
            context_tokens=s.context_tokens,
            max_output_tokens=s.max_output_tokens,
            min_context_tokens=min(s.min_context_tokens, s.context_tokens),
            min_output_tokens=min(s.min_output_tokens, s.max_output_tokens),
        ),
        PlanLimits(
            rerank_candidates=s.rerank_candidates,
            context_tokens=0,
            max_output_tokens=0,
            min_context_tokens=0,
            min_output_tokens=0,
            prompt_overhead_tokens=0,
            reserve_ms=2.0,
        ),
        quality=QualityTable.load(s.budget_quality_path or DEFAULT_QUALITY_PATH),
        learning=Learning(
            quantile=s.budget_quantile,
            halflife_requests=s.budget_halflife_requests,
            halflife_s=s.budget_halflife_s,
        ),
    )


class Pipeline:
    """Runs a request's stages in order, in their spans, within its budget."""

    def __init__(self, services: Services, budget: BudgetEngine | None = None) -> None:
        self.services = services
        self.stages = services.stages
        self.settings = services.settings
        self.budget = budget or build_budget_engine(self.settings)
        self.cost = self.budget.cost

    # -- retrieval -------------------------------------------------------------------------

    async def retrieve(
        self,
        query: str,
        collection: str,
        k: int,
        ledger: BudgetLedger,
        *,
        search_filter: SearchFilter | None = None,
    ) -> list[Passage]:
        """Embed, search (within ``search_filter``) and rerank (sized to the budget): the ``k``
        best passages."""
        passages, _ = await self._retrieve(query, collection, k, ledger, None, search_filter)
        return passages

    async def _retrieve(
        self,
        query: str,
        collection: str,
        k: int,
        ledger: BudgetLedger,
        question: str | None,
        search_filter: SearchFilter | None = None,
    ) -> tuple[list[Passage], Plan]:
        """``question`` is set for an answer (plan generation too), None for a search."""
        stages = self.stages
        stages.search.check(collection)
        with ledger.stage("embed") as span:
            embedded = await self._timed(
                ledger, "embed", stages.embed.run(query, deadline=ledger.deadline)
            )
            span.set_attributes(embedded.attributes())
        candidates = max(k, self.settings.rerank_candidates) if stages.rerank.available else k
        with ledger.stage("search") as span:
            found = await self._timed(
                ledger,
                "search",
                stages.search.run(
                    collection,
                    embedded.vector,
                    candidates,
                    deadline=ledger.deadline,
                    search_filter=search_filter,
                ),
            )
            span.set_attributes(found.attributes())
        plan = self._plan(ledger, k, question)
        if plan.rerank_candidates and found.passages:
            ledger.expect("rerank", plan.stage_ms.get("rerank", 0.0))
        with ledger.stage("rerank") as span:
            self._record_actions(plan, "rerank", ledger, span)
            started = time.perf_counter()
            # Wait only as long as the rest of the plan leaves room for.
            rest_ms = plan.predicted_ms - self.cost.predict("rerank", plan.rerank_candidates)
            reranked = await stages.rerank.run(
                query,
                found.passages,
                k=k,
                candidates=plan.rerank_candidates,
                deadline=ledger.deadline - max(rest_ms, 0.0) / 1000.0,
            )
            span.set_attributes(reranked.attributes())
            if reranked.error is not None:
                span.record_exception(reranked.error)
            if reranked.degradation is not None:
                ledger.degrade("rerank", *reranked.degradation, span)
            if reranked.scored:
                self.budget.observe_stage("rerank", _ms_since(started), reranked.scored)
        return reranked.passages, plan

    def _plan(self, ledger: BudgetLedger, k: int, question: str | None) -> Plan:
        available = self.stages.rerank.available
        engine = self.budget
        limits = (engine.search_policy if question is None else engine.answer_policy).limits
        backend = self.services.backend
        target = backend.cost_target(question) if question is not None else ""
        if not self.settings.degradation_policy:
            return Plan(
                limits.rerank_candidates if available else 0,
                limits.context_tokens,
                limits.max_output_tokens,
                0.0,
                target=target,
            )
        try:
            if question is None:
                return engine.plan_search(ledger, k=k, rerank_available=available)
            plan = engine.plan_answer(
                ledger,
                k=k,
                rerank_available=available,
                target=target,
                queue=self._target_queue(target),
            )
            return self._fit_context_length(plan, limits)
        except BudgetInfeasible as exc:
            if self.settings.on_infeasible == "passages" and limits.max_output_tokens:
                ledger.degrade("generate", "generation_skipped", str(exc))
                return Plan(0, limits.context_tokens, 0, 0.0, target=target)
            raise BudgetExhausted(str(exc)) from exc

    def _check_feasible(self, ledger: BudgetLedger, question: str) -> None:
        """Refuse at once a budget that not even the smallest plan can meet (a 504 that costs
        no embedding, search or model time, counted as a refusal), unless the passages alone may
        answer; and a request the generation pool's queue has no room for (503,
        ``BudgetEngine.admit``)."""
        if not self.settings.degradation_policy or self.settings.on_infeasible == "passages":
            return
        target = self.services.backend.cost_target(question)
        try:
            self.budget.check_feasible(ledger, target)
            self.budget.admit(
                ledger,
                target,
                self._target_queue(target),
                max_queued_per_slot=self.settings.max_queued_per_slot,
            )
        except BudgetInfeasible as exc:
            # The caller's budget is below the smallest answer, alone: refused before any work,
            # deliberately, so it stays out of the error ratio (anyone may send a tiny budget).
            tracing_metrics.ADMISSION_REFUSED.labels(
                route="/v1/ask", reason="budget_infeasible"
            ).inc()
            raise BudgetExhausted(str(exc)) from exc
        except TargetSaturated as exc:
            tracing_metrics.ADMISSION_REFUSED.labels(route="/v1/ask", reason="overloaded").inc()
            raise Overloaded(str(exc)) from exc

    def _fit_context_length(self, plan: Plan, limits: PlanLimits) -> Plan:
        """Shrink the context so that prompt + output fits the server's context length (the
        backend caps the output for whatever is left over)."""
        length = getattr(self.services.backend, "context_length", None)
        if not length:
            return plan
        room = length - limits.prompt_overhead_tokens - plan.max_output_tokens
        if plan.context_tokens <= room:
            return plan
        context = max(room, min(limits.min_context_tokens, plan.context_tokens))
        actions = [a for a in plan.actions if a.action != "context_reduced"]
        actions.append(
            Action(
                "assemble",
                "context_reduced",
                f"{context} of {limits.context_tokens} tokens: the server's context length is "
                f"{length} and the answer may have {plan.max_output_tokens}",
            )
        )
        return replace(plan, context_tokens=context, actions=actions)

    def _target_queue(self, target: str) -> TargetQueue:
        """How ``target`` queues: its slots, whether it is ours alone and EDF, others' load.

        Others' load is the queue the server reports beyond its running batch, less what our
        own requests can account for: a remote server's load is polled every few seconds, and
        its running requests then were mostly ours, long finished. Counting them again would
        refuse requests behind a queue that is gone."""
        backend = self.services.backend
        load = backend.target_load(target)
        slots = max(load.max_running or 1, 1) if load is not None else 1
        if load is None or backend.earliest_deadline_first:
            return TargetQueue(slots=slots, edf=backend.earliest_deadline_first)
        ours = self.budget.reservations.open(target)
        return TargetQueue(slots=slots, external=max(load.waiting - max(ours - slots, 0), 0))

    # -- answering -------------------------------------------------------------------------

    async def prepare(
        self,
        question: str,
        collection: str,
        top_k: int,
        ledger: BudgetLedger,
        *,
        max_output_tokens: int | None = None,
    ) -> Prepared:
        """Screen the question, retrieve its passages, plan, and assemble the prompt.

        ``max_output_tokens`` is the caller's cap on the answer: the plan keeps the smaller of it
        and what the budget allows (a caller's choice, not a degradation)."""
        stages = self.stages
        if not stages.assemble.ready or not self.services.backend.loaded:
            raise BackendUnavailable(
                "the generation backend is not loaded: "
                + self.services.problems.get("generator", "still starting")
            )
        self._check_feasible(ledger, question)
        with ledger.stage("moderate.question") as span:
            screened = await self._timed(
                ledger,
                "moderate.question",
                stages.screen_question.run(question, deadline=ledger.deadline),
            )
            span.set_attributes(screened.attributes())
        passages, plan = await self._retrieve(question, collection, top_k, ledger, question)
        if max_output_tokens is not None and 0 < max_output_tokens <= plan.max_output_tokens:
            # The caller wants no more than the budget allows: the budget capped nothing.
            actions = [a for a in plan.actions if a.action != "output_capped"]
            plan = replace(plan, max_output_tokens=max_output_tokens, actions=actions)
        with ledger.stage("moderate.passages") as span:
            passages_screened = await self._timed(
                ledger,
                "moderate.passages",
                stages.screen_passages.run(passages, deadline=ledger.deadline),
            )
            passages_screened.record(span)
        passages = passages_screened.passages
        # Hold the planned generation time at its target, so later requests plan around it.
        reservation = self.budget.reserve(plan, ledger) if plan.max_output_tokens > 0 else None
        try:
            with ledger.stage("assemble") as span:
                self._record_actions(plan, "assemble", ledger, span)
                assembled = await self._timed(
                    ledger,
                    "assemble",
                    stages.assemble.run(
                        question,
                        passages,
                        context_tokens=plan.context_tokens,
                        deadline=ledger.deadline,
                    ),
                )
                span.set_attributes(assembled.attributes())
        except BaseException:
            if reservation is not None:
                reservation.release()
            raise
        return Prepared(
            question,
            passages,
            assembled.prompt,
            plan,
            with_answer=plan.max_output_tokens > 0,
            reservation=reservation,
            quarantined=passages_screened.quarantined,
        )

    async def generate(
        self, prepared: Prepared, ledger: BudgetLedger
    ) -> AsyncGenerator[AnswerEvent, None]:
        """Stream the answer: ``AnswerDelta`` events of moderated text, then one ``AnswerDone``.

        Decoding stops at the deadline (finish reason ``deadline``). Closing this generator
        early (a client that went away) closes the backend's stream, which stops decoding; no
        ``AnswerDone`` follows then. Failures raise.
        """
        reservation = prepared.reservation
        try:
            if not prepared.with_answer:
                outcome = AnswerOutcome(finish_reason="skipped")
            else:
                async with aclosing(self._generate(prepared, ledger)) as events:
                    async for event in events:
                        if isinstance(event, AnswerDone):
                            outcome = event.outcome
                            break
                        yield event
        finally:
            if reservation is not None:
                reservation.release()
        outcome.attribution = await self.attribute(prepared, outcome, ledger)
        yield AnswerDone(outcome)

    async def attribute(
        self, prepared: Prepared, outcome: AnswerOutcome, ledger: BudgetLedger
    ) -> Attributed:
        """The attribute stage, on the final (moderated) answer text: the model's labels, or
        attribution when there is time left for it (else skipped, as a degradation)."""
        stage = self.stages.attribute
        passages = {p.label: p.text for p in prepared.prompt.passages}
        with ledger.stage("attribute") as span:
            attributed = stage.by_model(outcome.text, set(passages))
            if attributed is None:
                left_ms = ledger.remaining_ms - _FINISH_RESERVE_MS
                needed_ms = self.cost.rate("attribute")
                if left_ms <= 0 or left_ms < needed_ms:
                    attributed = Attributed.skipped(
                        "attribution_skipped",
                        f"{max(left_ms, 0.0):.0f} ms of the budget left, attribution takes "
                        f"about {needed_ms:.0f} ms: citations not attributed",
                    )
                else:
                    started = time.perf_counter()
                    attributed = await stage.run(
                        outcome.text,
                        passages,
                        deadline=ledger.deadline - _FINISH_RESERVE_MS / 1000.0,
                    )
                    if attributed.method == "attributed":
                        self.budget.observe_stage("attribute", _ms_since(started), 1)
            span.set_attributes(attributed.attributes())
            if attributed.degradation is not None:
                ledger.degrade("attribute", *attributed.degradation, span)
        return attributed

    async def _generate(
        self, prepared: Prepared, ledger: BudgetLedger
    ) -> AsyncGenerator[AnswerEvent, None]:
        """The generate and moderate.answer stages: moderated deltas, then the outcome."""
        backend = self.services.backend
        moderate = self.stages.moderate_answer
        answer_filter = moderate.open()
        plan = prepared.plan
        stage = ledger.begin(
            "generate",
            **{
                "gen_ai.operation.name": "text_completion",
                "gen_ai.system": backend.name,
                "gen_ai.request.model": backend.model,
                "gen_ai.request.max_tokens": plan.max_output_tokens,
                "gen_ai.request.temperature": self.settings.temperature,
            },
        )
        span = stage.span
        if plan.stage_ms:
            ledger.expect("generate", plan.stage_ms.get("queue", 0.0) + plan.stage_ms["generate"])
        self._record_actions(plan, "generate", ledger, span)
        reservation = prepared.reservation
        if reservation is not None:
            reservation.start()
        text: list[str] = []
        ttft_ms: float | None = None
        generated: Generated | None = None
        error: BaseException | None = None
        try:
            events = self.stages.generate.run(
                prepared.prompt,
                max_tokens=plan.max_output_tokens,
                target=plan.target,
                deadline=ledger.deadline,
                # Room to flush the answer filter and send the last event before the deadline.
                # None is held for attribution: an answer decoded up to the deadline keeps its
                # tokens, and its citations go unattributed (``attribute``), saying so.
                reserve_ms=self.cost.rate("moderate.answer") + _FINISH_RESERVE_MS,
                stop_at=(lambda: reservation.stop_at) if reservation is not None else _no_stop,
                span=span,
            )
            async with aclosing(events):
                async for event in events:
                    if isinstance(event, Generated):
                        generated = event
                        break
                    if isinstance(event, RouteDecision):
                        if span.is_recording():
                            span.set_attribute("ragtime.budget.target", event.target)
                        if event.degradation is not None:  # e.g. a smaller model, to fit
                            ledger.degrade("generate", *event.degradation, span)
                        continue
                    if ttft_ms is None:
                        ttft_ms = ledger.spent_ms
                        self._first_token(span, ttft_ms)
                    released = answer_filter.feed(event.text)
                    if released:
                        text.append(released)
                        yield AnswerDelta(released)
            assert generated is not None, "the generate stage ends with its result"
            self._finished(generated, ledger, span)
            if ttft_ms is None and generated.finish_reason in ("deadline", "yielded"):
                raise BudgetExhausted("no answer token came before the deadline")
            tail = await self._moderate_tail(answer_filter, ledger)
            if tail.text:
                text.append(tail.text)
                yield AnswerDelta(tail.text)
        except BaseException as exc:
            error = exc
            raise
        finally:
            outcome = AnswerOutcome(
                text="".join(text),
                usage=generated.usage if generated is not None else None,
                finish_reason=_finish_reason(generated, error),
                ttft_ms=ttft_ms,
                redactions=dict(answer_filter.redactions),
            )
            self._finish_generate_span(span, outcome, answer_filter.elapsed_ms)
            stage.end(error if isinstance(error, Exception) else None)
        yield AnswerDone(outcome)

    def _first_token(self, span: Span, ttft_ms: float) -> None:
        tracing_metrics.TTFT_SECONDS.observe(ttft_ms / 1000.0)
        span.add_event("first_token", {"ragtime.ttft_ms": ttft_ms})
        span.set_attribute("ragtime.ttft.over_target", ttft_ms > self.settings.ttft_target_ms)

    def _finished(self, generated: Generated, ledger: BudgetLedger, span: Span) -> None:
        """Record how generation ended, and teach the engine what it cost."""
        if generated.finish_reason == "yielded":
            ledger.degrade(
                "generate",
                "output_capped",
                "stopped early: a request queued behind it needed the time",
                span,
            )
        elif generated.finish_reason == "deadline":
            ledger.degrade("generate", "deadline_stop", "decoding stopped at the deadline", span)
        if generated.usage is not None:
            span.set_attribute("ragtime.generate.queue_ms", round(generated.queue_ms, 3))
        self._observe_generation(generated)

    def _observe_generation(self, done: Generated) -> None:
        """Teach the engine what this target's prefill and decode cost (our queue aside)."""
        usage = done.usage
        if done.finish_reason not in ("stop", "length") or done.first_at is None or usage is None:
            return
        self.budget.observe_generation(
            done.target,
            prompt_tokens=usage.prompt_tokens,
            cached_tokens=usage.cached_tokens,
            ttft_ms=(done.first_at - done.started) * 1000.0 - done.queue_ms,
            output_tokens=usage.completion_tokens,
            decode_ms=_ms_since(done.first_at),
            shared_prefix_tokens=self.stages.assemble.shared_prefix_tokens,
        )

    @staticmethod
    def _record_actions(plan: Plan, stage: str, ledger: BudgetLedger, span: Span) -> None:
        for action in plan.actions:
            if action.stage == stage:
                ledger.degrade(stage, action.action, action.reason, span)
        if span.is_recording() and stage == "rerank":
            span.set_attributes(
                {
                    "ragtime.plan.rerank_candidates": plan.rerank_candidates,
                    "ragtime.plan.context_tokens": plan.context_tokens,
                    "ragtime.plan.max_output_tokens": plan.max_output_tokens,
                    "ragtime.plan.predicted_ms": round(plan.predicted_ms, 3),
                }
            )

    async def _timed(self, ledger: BudgetLedger, stage: str, work: Awaitable[T]) -> T:
        """Await one stage's run; teach the cost model what it took. A stage still running at
        the deadline ends the request."""
        started = time.perf_counter()
        try:
            result = await work
        except DeadlinePassed as exc:
            raise BudgetExhausted(str(exc)) from None
        self.budget.observe_stage(stage, _ms_since(started), 1)
        return result

    async def _moderate_tail(
        self, answer_filter: AnswerFilter, ledger: BudgetLedger
    ) -> ModeratedTail:
        """Release the held tail in the ``moderate.answer`` span, charged with the inline work."""
        ledger.charge("moderate.answer", answer_filter.elapsed_ms)
        with ledger.stage("moderate.answer") as span:
            tail = await self.stages.moderate_answer.run(answer_filter)
            span.set_attributes(tail.attributes())
        self.budget.observe_stage("moderate.answer", tail.total_ms, 1)
        return tail

    @staticmethod
    def _finish_generate_span(span: Span, outcome: AnswerOutcome, inline_ms: float) -> None:
        if not span.is_recording():
            return
        span.set_attribute("gen_ai.response.finish_reasons", [outcome.finish_reason])
        span.set_attribute("ragtime.moderation.inline_ms", round(inline_ms, 3))
        if outcome.ttft_ms is not None:
            span.set_attribute("ragtime.ttft_ms", round(outcome.ttft_ms, 3))
        if outcome.usage is not None:
            usage = outcome.usage
            span.set_attributes(
                {
                    "gen_ai.usage.input_tokens": usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": usage.completion_tokens,
                    "ragtime.usage.cached_tokens": usage.cached_tokens,
                    "ragtime.usage.cached_ratio": (
                        round(usage.cached_tokens / usage.prompt_tokens, 4)
                        if usage.prompt_tokens
                        else 0.0
                    ),
                }
            )


def _no_stop() -> float | None:
    return None


def _finish_reason(generated: Generated | None, error: BaseException | None) -> str:
    """How the answer ended, as the report and the span say it."""
    if isinstance(error, BudgetExhausted):
        return "deadline"
    if error is not None:
        return "cancelled" if not isinstance(error, Exception) else "error"
    if generated is None:
        return "cancelled"
    return "length" if generated.finish_reason == "yielded" else generated.finish_reason


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
