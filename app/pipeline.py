"""The request pipeline: the stages of one question, in order, each charged to the budget.

moderate.question -> embed -> search -> (plan) -> rerank -> assemble -> generate (the answer
filtered as it streams) -> moderate.answer. Retrieval-only requests stop after rerank.

After search, the budget engine (``tracing.budget``) sizes the rest of the request to what is
left of its budget, for the target that will serve it and its place in that target's queue
(rerank candidates, context tokens, output tokens), or fails fast when nothing fits. A stage
that fails other than generation (a reranker error) is skipped as a degradation. Blocking work
(torch, FAISS, tokenisation) runs in worker threads, waited for no longer than the budget allows;
generation stops at the deadline. Every stage's cost goes back to the engine's cost model.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span

from app.config import Settings
from app.errors import BudgetExhausted
from app.moderation import AnswerFilter
from app.services import Services
from inference import (
    AssembledPrompt,
    BackendUnavailable,
    GenerationDone,
    GenerationFailed,
    GenerationRejected,
    RouteDecision,
    Usage,
)
from retrieval import Passage, RerankResult, UnknownCollection
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
    next_before_deadline,
    run_in_thread,
)

_LABEL = re.compile(r"\[(\d{1,3})\]")
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


@dataclass
class _GenerationRun:
    """One request's generation, as the budget engine learns from it."""

    target: str
    started: float
    first_at: float | None = None


@dataclass
class AnswerOutcome:
    """How an answer ended: built by ``Pipeline.generate`` and delivered in its ``AnswerDone``."""

    text: str = ""  # the moderated answer, as sent
    usage: Usage | None = None
    finish_reason: str = "unknown"
    ttft_ms: float | None = None
    redactions: dict[str, int] = field(default_factory=dict)

    def cited_labels(self) -> set[int]:
        return {int(m) for m in _LABEL.findall(self.text)}


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
    def __init__(self, services: Services, budget: BudgetEngine | None = None) -> None:
        self.services = services
        self.settings = services.settings
        self.budget = budget or build_budget_engine(self.settings)
        self.cost = self.budget.cost
        self._shared_prefix: int | None = None

    # -- retrieval -------------------------------------------------------------------------

    async def retrieve(
        self, query: str, collection: str, k: int, ledger: BudgetLedger
    ) -> list[Passage]:
        """Embed, search and rerank (sized to the budget): the ``k`` best passages."""
        passages, _ = await self._retrieve(query, collection, k, ledger, None)
        return passages

    async def _retrieve(
        self,
        query: str,
        collection: str,
        k: int,
        ledger: BudgetLedger,
        question: str | None,
    ) -> tuple[list[Passage], Plan]:
        """``question`` is set for an answer (plan generation too), None for a search."""
        store, embedder, reranker = (
            self.services.store,
            self.services.embedder,
            self.services.reranker,
        )
        if not store.has_collection(collection):
            raise UnknownCollection(
                f"unknown collection {collection!r}; known: {sorted(store.collections())}"
            )
        with ledger.stage("embed", **{"ragtime.embed.model": embedder.model_name}):
            started = time.perf_counter()
            vectors = await self._in_thread(ledger, "embed", embedder.embed, [query])
            self.budget.observe_stage("embed", _ms_since(started), 1)
        candidates = max(k, self.settings.rerank_candidates) if reranker.available else k
        with ledger.stage("search") as span:
            started = time.perf_counter()
            passages = await self._in_thread(
                ledger, "search", store.search, collection, vectors[0], candidates
            )
            self.budget.observe_stage("search", _ms_since(started), 1)
            span.set_attributes(
                {
                    "ragtime.search.collection": collection,
                    "ragtime.search.k": candidates,
                    "ragtime.search.results": len(passages),
                    "ragtime.search.top_score": passages[0].score if passages else 0.0,
                }
            )
        plan = self._plan(ledger, k, question)
        if plan.rerank_candidates and passages:
            ledger.expect("rerank", plan.stage_ms.get("rerank", 0.0))
        with ledger.stage("rerank") as span:
            passages = await self._rerank(query, passages, k, plan, ledger, span)
        return passages, plan

    def _plan(self, ledger: BudgetLedger, k: int, question: str | None) -> Plan:
        available = self.services.reranker.available
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
        no embedding, search or model time), unless the passages alone may answer."""
        if not self.settings.degradation_policy or self.settings.on_infeasible == "passages":
            return
        try:
            self.budget.check_feasible(ledger, self.services.backend.cost_target(question))
        except BudgetInfeasible as exc:
            raise BudgetExhausted(str(exc)) from exc

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

    async def _rerank(
        self,
        query: str,
        passages: list[Passage],
        k: int,
        plan: Plan,
        ledger: BudgetLedger,
        span: Span,
    ) -> list[Passage]:
        reranker = self.services.reranker
        self._record_actions(plan, "rerank", ledger, span)
        if not reranker.available:
            span.set_attribute("ragtime.rerank.skipped", True)
            ledger.degrade("rerank", "rerank_skipped", self.services.reranker_status, span)
            return passages[:k]
        if not plan.rerank_candidates or not passages:
            span.set_attribute("ragtime.rerank.skipped", True)
            return passages[:k]
        candidates = passages[: plan.rerank_candidates]
        started = time.perf_counter()
        # Wait only as long as the rest of the plan leaves room for.
        rest_ms = plan.predicted_ms - self.cost.predict("rerank", len(candidates))
        try:
            result = await asyncio.wait_for(
                asyncio.to_thread(self._rerank_work, query, candidates, k),
                timeout=max(ledger.remaining_ms - rest_ms, 0.0) / 1000.0,
            )
        except TimeoutError:
            ledger.degrade(
                "rerank",
                "rerank_timeout",
                f"rerank ran past its {ledger.remaining_ms - rest_ms:.0f} ms; vector order kept",
                span,
            )
            return passages[:k]
        except Exception as exc:  # a reranker that fails is skipped: the vector order stands
            span.record_exception(exc)
            ledger.degrade(
                "rerank",
                "rerank_failed",
                f"the reranker failed ({type(exc).__name__}: {exc}); vector order kept",
                span,
            )
            return passages[:k]
        self.budget.observe_stage("rerank", _ms_since(started), len(candidates))
        span.set_attributes(
            {
                "ragtime.rerank.model": reranker.model_name or "",
                "ragtime.rerank.candidates": result.candidates,
            }
        )
        return result.passages

    def _rerank_work(self, query: str, candidates: list[Passage], k: int) -> RerankResult:
        if self.settings.fault_rerank_delay_ms:  # bench/test fault: a slower model, per pair
            time.sleep(self.settings.fault_rerank_delay_ms * len(candidates) / 1000.0)
        return self.services.reranker.rerank(query, candidates, k)

    # -- answering -------------------------------------------------------------------------

    async def prepare(
        self, question: str, collection: str, top_k: int, ledger: BudgetLedger
    ) -> Prepared:
        """Screen the question, retrieve its passages, plan, and assemble the prompt."""
        assembler = self.services.assembler
        if assembler is None or not self.services.backend.loaded:
            raise BackendUnavailable(
                "the generation backend is not loaded: "
                + self.services.problems.get("generator", "still starting")
            )
        self._check_feasible(ledger, question)
        with ledger.stage("moderate.question") as span:
            score = await self._in_thread(
                ledger, "moderate.question", self.services.moderator.screen_question, question
            )
            span.set_attribute("ragtime.moderation.score", round(score, 4))
        passages, plan = await self._retrieve(question, collection, top_k, ledger, question)
        # Hold the planned generation time at its target, so later requests plan around it.
        reservation = self.budget.reserve(plan, ledger) if plan.max_output_tokens > 0 else None
        try:
            with ledger.stage("assemble") as span:
                self._record_actions(plan, "assemble", ledger, span)
                prompt = await self._in_thread(
                    ledger, "assemble", assembler.assemble, question, passages,
                    context_tokens=plan.context_tokens,
                )  # fmt: skip
                span.set_attributes(
                    {
                        "ragtime.prompt.tokens": prompt.prompt_tokens,
                        "ragtime.prompt.passages": len(prompt.passages),
                        "ragtime.prompt.dropped": prompt.dropped,
                        "ragtime.prompt.truncated": any(p.truncated for p in prompt.passages),
                        "ragtime.prompt.context_tokens_budget": prompt.context_tokens_budget,
                        "ragtime.prompt.context_tokens_used": prompt.context_tokens_used,
                    }
                )
        except BaseException:
            if reservation is not None:
                reservation.release()
            raise
        return Prepared(
            question,
            passages,
            prompt,
            plan,
            with_answer=plan.max_output_tokens > 0,
            reservation=reservation,
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
        outcome = AnswerOutcome()
        try:
            if not prepared.with_answer:
                outcome.finish_reason = "skipped"
            else:
                async with aclosing(self._generate(prepared, ledger, outcome)) as deltas:
                    async for delta in deltas:
                        yield AnswerDelta(delta)
        finally:
            if reservation is not None:
                reservation.release()
        yield AnswerDone(outcome)

    async def _generate(
        self, prepared: Prepared, ledger: BudgetLedger, outcome: AnswerOutcome
    ) -> AsyncGenerator[str, None]:
        """The text deltas; ``outcome`` is this call's own record, owned by ``generate``."""
        backend = self.services.backend
        answer_filter = self.services.moderator.answer_filter()
        plan = prepared.plan
        max_tokens = plan.max_output_tokens
        stage = ledger.begin(
            "generate",
            **{
                "gen_ai.operation.name": "text_completion",
                "gen_ai.system": backend.name,
                "gen_ai.request.model": backend.model,
                "gen_ai.request.max_tokens": max_tokens,
                "gen_ai.request.temperature": self.settings.temperature,
            },
        )
        span = stage.span
        if plan.stage_ms:
            ledger.expect("generate", plan.stage_ms.get("queue", 0.0) + plan.stage_ms["generate"])
        self._record_actions(plan, "generate", ledger, span)
        error: BaseException | None = None
        outcome.finish_reason = "cancelled"
        run = _GenerationRun(target=plan.target, started=time.perf_counter())
        reservation = prepared.reservation
        if reservation is not None:
            reservation.start()
        # Made current for the call, so a remote backend's propagated context names this span.
        with trace.use_span(span, end_on_exit=False):
            events = backend.stream(
                prepared.prompt,
                max_tokens=max_tokens,
                temperature=self.settings.temperature,
                deadline=ledger.deadline,
            )
        # Room to flush the answer filter and send the last event before the deadline.
        reserve_ms = self.cost.rate("moderate.answer") + _FINISH_RESERVE_MS
        try:
            async with aclosing(events):
                while True:
                    stop_at = reservation.stop_at if reservation is not None else None
                    event = await next_before_deadline(
                        events, ledger, reserve_ms=reserve_ms, stop_at=stop_at
                    )
                    if event is None and stop_at is not None and stop_at < ledger.deadline:
                        outcome.finish_reason = "length"  # cut short for a queued request
                        ledger.degrade(
                            "generate",
                            "output_capped",
                            "stopped early: a request queued behind it needed the time",
                            span,
                        )
                        break
                    if event is None:  # the deadline came first
                        outcome.finish_reason = "deadline"
                        ledger.degrade(
                            "generate", "deadline_stop", "decoding stopped at the deadline", span
                        )
                        break
                    if isinstance(event, RouteDecision):
                        run.target = event.target or run.target
                        if span.is_recording():
                            span.set_attribute("ragtime.budget.target", run.target)
                        if event.degradation is not None:  # e.g. a smaller model, to fit
                            ledger.degrade("generate", *event.degradation, span)
                        continue
                    if isinstance(event, GenerationDone):
                        outcome.usage = event.usage
                        outcome.finish_reason = event.finish_reason
                        span.set_attribute("ragtime.generate.queue_ms", round(event.queue_ms, 3))
                        self._observe_generation(run, event)
                        break
                    if run.first_at is None:
                        run.first_at = time.perf_counter()
                        outcome.ttft_ms = ledger.spent_ms
                        tracing_metrics.TTFT_SECONDS.observe(outcome.ttft_ms / 1000.0)
                        span.add_event("first_token", {"ragtime.ttft_ms": outcome.ttft_ms})
                        span.set_attribute(
                            "ragtime.ttft.over_target",
                            outcome.ttft_ms > self.settings.ttft_target_ms,
                        )
                    if self.settings.fault_generate_token_delay_ms:  # bench/test fault
                        await asyncio.sleep(self.settings.fault_generate_token_delay_ms / 1000.0)
                    released = answer_filter.feed(event.text)
                    if released:
                        outcome.text += released
                        yield released
            if run.first_at is None and outcome.finish_reason in ("deadline", "length"):
                raise BudgetExhausted("no answer token came before the deadline")
            tail = self._moderate_tail(answer_filter, ledger, outcome)
            if tail:
                outcome.text += tail
                yield tail
        except (BackendUnavailable, GenerationFailed, GenerationRejected, BudgetExhausted) as exc:
            error = exc
            outcome.finish_reason = "deadline" if isinstance(exc, BudgetExhausted) else "error"
            raise
        except Exception as exc:
            error = exc
            outcome.finish_reason = "error"
            if run.first_at is None:
                raise BackendUnavailable(f"generation failed: {exc}") from exc
            raise GenerationFailed(f"generation failed mid-stream: {exc}") from exc
        finally:
            self._finish_generate_span(span, outcome, answer_filter.elapsed_ms)
            stage.end(error)

    def _observe_generation(self, run: _GenerationRun, done: GenerationDone) -> None:
        """Teach the engine what this target's prefill and decode cost (our queue aside)."""
        if done.finish_reason not in ("stop", "length") or run.first_at is None:
            return
        usage = done.usage
        self.budget.observe_generation(
            run.target,
            prompt_tokens=usage.prompt_tokens,
            cached_tokens=usage.cached_tokens,
            ttft_ms=(run.first_at - run.started) * 1000.0 - done.queue_ms,
            output_tokens=usage.completion_tokens,
            decode_ms=_ms_since(run.first_at),
            shared_prefix_tokens=self._shared_prefix_tokens(),
        )

    def _shared_prefix_tokens(self) -> int | None:
        """The tokens every prompt starts with (system prompt, template): what a new question
        can count on finding in a prefix cache."""
        assembler = self.services.assembler
        if self._shared_prefix is None and assembler is not None:
            one = assembler.assemble("What is one thing?", []).token_ids
            other = assembler.assemble("Why another?", []).token_ids
            shared = 0
            for a, b in zip(one, other, strict=False):
                if a != b:
                    break
                shared += 1
            self._shared_prefix = shared
        return self._shared_prefix

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

    async def _in_thread(
        self, ledger: BudgetLedger, stage: str, fn: Callable[..., T], *args: Any, **kwargs: Any
    ) -> T:
        """Run blocking ``fn`` in a thread, waiting no longer than the budget has left."""
        try:
            return await run_in_thread(ledger, stage, fn, *args, **kwargs)
        except DeadlinePassed as exc:
            raise BudgetExhausted(str(exc)) from None

    def _moderate_tail(
        self, answer_filter: AnswerFilter, ledger: BudgetLedger, outcome: AnswerOutcome
    ) -> str:
        """Release the held tail in the ``moderate.answer`` span, charged with the inline work."""
        ledger.charge("moderate.answer", answer_filter.elapsed_ms)
        with ledger.stage("moderate.answer") as span:
            tail = answer_filter.flush()
            outcome.redactions = dict(answer_filter.redactions)
            span.set_attributes(
                {
                    "ragtime.moderation.inline_ms": round(answer_filter.elapsed_ms, 3),
                    "ragtime.moderation.redactions": sum(outcome.redactions.values()),
                }
            )
            for kind, count in outcome.redactions.items():
                span.set_attribute(f"ragtime.moderation.redacted.{kind}", count)
        self.budget.observe_stage("moderate.answer", answer_filter.elapsed_ms, 1)
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


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
