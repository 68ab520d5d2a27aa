"""The request pipeline: the stages of one question (``app.stages``), in order, each in its span
and charged to the request's budget.

moderate.question -> embed -> search (dense), keyword (BM25), or both fused by reciprocal rank
(the request's or ``RAGTIME_SEARCH_MODE``'s mode) -> (plan) -> rerank -> moderate.passages
(passages that carry instructions for the model are quarantined) -> assemble -> generate (the
answer filtered as it streams) -> moderate.answer -> attribute (which passages the final answer
cites: its own ``[n]`` labels, else its sentences attributed by similarity; skipped, and said
so, when the budget has no time left for it). Retrieval-only requests stop after rerank.

The pipeline runs the stages and plans nothing: each request's budget session
(``tracing.budget.session``) admits it, plans it after search, holds its generation time at the
target, says how long each stage may wait, and learns what each cost. A stage that fails other
than generation (a reranker error) is skipped as a degradation. A request's state is its
``BudgetLedger``, its ``Prepared`` (with the session) and the ``AnswerOutcome`` given back.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import replace
from typing import TypeVar

import numpy as np

from app.answer_events import (
    AnswerDelta,
    AnswerDone,
    AnswerEvent,
    AnswerOutcome,
    Prepared,
    finish_reason,
)
from app.budget_engine import build_budget_engine
from app.errors import BudgetExhausted, InvalidField, budget_refusals
from app.frontdoor.shutdown import Shutdown
from app.services import Services
from app.settings import SearchMode
from app.stages import Attributed, Generated
from app.stages.attribution import kept_chunks
from app.stages.generation import record_first_token, record_generation_end
from app.stages.result import StageResult
from inference import RouteDecision
from retrieval import InvalidFilter, Passage, SearchFilter, fuse_passages, keyword_weight
from tracing.budget import (
    BudgetEngine,
    BudgetLedger,
    BudgetSession,
    StageName,
)

R = TypeVar("R", bound=StageResult)


class Pipeline:
    """Runs a request's stages in order, in their spans, within its budget."""

    def __init__(
        self,
        services: Services,
        budget: BudgetEngine | None = None,
        *,
        shutdown: Shutdown | None = None,
    ) -> None:
        self.services = services
        self.shutdown = shutdown or Shutdown(services.settings.shutdown_grace_s)
        """The server's stop, which ends live streams at its grace (``app.answers.Drain``)."""
        self.stages = services.stages
        self.settings = services.settings
        self.budget = budget or build_budget_engine(self.settings)
        overhead = self.stages.assemble.overhead_tokens
        if overhead is not None:  # measured at warm-up with the served model's tokenizer
            self.budget.set_prompt_overhead(overhead)

    # -- retrieval -------------------------------------------------------------------------

    async def retrieve(
        self,
        query: str,
        collection: str,
        k: int,
        ledger: BudgetLedger,
        *,
        route: str,
        search_filter: SearchFilter | None = None,
        mode: SearchMode | None = None,
    ) -> list[Passage]:
        """Embed, search (within ``search_filter``, in ``mode``: default the setting's) and
        rerank (sized to the budget): the ``k`` best passages."""
        session = BudgetSession(self.budget, ledger, route=route)
        with budget_refusals():
            passages, _ = await self._retrieve(
                query, collection, k, session, search_filter, mode=mode, need_vector=False
            )
        return passages

    async def _retrieve(
        self,
        query: str,
        collection: str,
        k: int,
        session: BudgetSession,
        search_filter: SearchFilter | None = None,
        *,
        mode: SearchMode | None = None,
        need_vector: bool = True,
    ) -> tuple[list[Passage], np.ndarray | None]:
        """The passages, and the query's vector (which pruning weighs sentences by; None when
        a keyword search did not ``need_vector``)."""
        stages = self.stages
        mode = mode or self.settings.search_mode
        try:
            stages.search.check(collection, search_filter)
        except InvalidFilter as exc:
            raise InvalidField(exc.field, exc.reason) from exc
        vector: np.ndarray | None = None
        candidates = max(k, self.settings.rerank_candidates) if stages.rerank.available else k
        dense: list[Passage] = []
        keyword: list[Passage] = []
        if mode != "keyword" or need_vector:
            embedder = self.services.embedders_for(collection)
            embedded = await session.run(
                StageName.EMBED, lambda by: stages.embed.run(query, deadline=by, embedder=embedder)
            )
            vector = embedded.vector
        if mode != "keyword" and vector is not None:
            found = await session.run(
                StageName.SEARCH,
                lambda by: stages.search.run(
                    collection,
                    vector,
                    candidates,
                    deadline=by,
                    search_filter=search_filter,
                    backend=embedded.backend,
                ),
            )
            dense = found.passages
        if mode == "keyword" or (mode == "hybrid" and self._keyword_side(session, query, k)):
            keyword_found = await session.run(
                StageName.KEYWORD,
                lambda by: stages.keyword.run(
                    collection, query, candidates, deadline=by, search_filter=search_filter
                ),
            )
            keyword = keyword_found.passages
        candidates_found = (
            fuse_passages(dense, keyword, candidates, query=query)
            if mode == "hybrid"
            else [replace(p, found_by=(mode,)) for p in (dense if mode == "dense" else keyword)]
        )
        plan = session.plan(k=k, rerank_available=stages.rerank.available)
        reranked = await session.run(
            StageName.RERANK,
            lambda by: stages.rerank.run(
                query, candidates_found, k=k, candidates=plan.rerank_candidates, deadline=by
            ),
            runs=bool(candidates_found),
            units=lambda reranked: reranked.scored,
        )
        return reranked.passages, vector

    def _keyword_side(self, session: BudgetSession, query: str, k: int) -> bool:
        """Whether hybrid search runs its keyword side: only for a query typed to be found by
        its words, a short one that holds an exact term or is not a question (otherwise its
        ranking weighs nothing in the fusion: ``keyword_weight``), and only when the budget
        finds it worth its time; when not, the skip is a degradation, said on the keyword
        span."""
        if not keyword_weight(query):
            return False
        action = session.keyword_side(k=k, rerank_available=self.stages.rerank.available)
        if action is not None:
            session.skip(action)
        return action is None

    # -- answering -------------------------------------------------------------------------

    async def prepare(
        self,
        question: str,
        collection: str,
        top_k: int,
        ledger: BudgetLedger,
        *,
        route: str,
        max_output_tokens: int | None = None,
    ) -> Prepared:
        """Screen the question, retrieve its passages, plan, and assemble the prompt. The plan
        keeps the caller's ``max_output_tokens`` when smaller than what the budget allows."""
        stages = self.stages
        self.services.require_generator()
        session = BudgetSession(
            self.budget,
            ledger,
            route=route,
            question=question,
            serving=self.services.backend,
            output_cap=max_output_tokens,
        )
        with budget_refusals():
            session.admit()
            await session.run(
                StageName.MODERATE_QUESTION,
                lambda by: stages.screen_question.run(question, deadline=by),
            )
            passages, vector = await self._retrieve(question, collection, top_k, session)
            kept = await session.run(
                StageName.MODERATE_PASSAGES,
                lambda by: stages.screen_passages.run(passages, deadline=by),
            )
            # Hold the planned generation time at its target, so later requests plan around it.
            session.reserve()
            try:
                plan = session.planned
                assembled = await session.run(
                    StageName.ASSEMBLE,
                    lambda by: stages.assemble.run(
                        question,
                        kept.passages,
                        context_tokens=plan.context_tokens,
                        deadline=by,
                        prune_for=vector if plan.prune else None,
                    ),
                )
            except BaseException:
                session.release()
                raise
        return Prepared(question, kept.passages, assembled.prompt, session, kept.quarantined)

    async def generate(self, prepared: Prepared) -> AsyncGenerator[AnswerEvent, None]:
        """``AnswerDelta`` events of moderated text, then one ``AnswerDone``; decoding stops at
        the deadline. Closing this early (a client gone) closes the backend's stream, which
        stops decoding, and no ``AnswerDone`` follows. Failures raise."""
        outcome = AnswerOutcome(finish_reason="skipped")
        with prepared.session.holding():
            if prepared.with_answer:
                async with aclosing(self._generate(prepared)) as events:
                    async for event in events:
                        if isinstance(event, AnswerDone):
                            outcome = event.outcome
                            break
                        yield event
        outcome.attribution = await self.attribute(prepared, outcome)
        yield AnswerDone(outcome)

    async def attribute(self, prepared: Prepared, outcome: AnswerOutcome) -> Attributed:
        """The attribute stage, on the final (moderated) answer text: the model's labels, or
        attribution when there is time left for it (else skipped, as a degradation)."""
        stage, session = self.stages.attribute, prepared.session
        passages = {p.label: p.text for p in prepared.prompt.passages}

        async def attribute(by: float) -> Attributed:
            attributed = stage.by_model(outcome.text, set(passages))
            if attributed is not None:
                return attributed
            room = session.attribution()
            if not room.fits:
                return Attributed.skipped("attribution_skipped", room.reason)
            chunks = kept_chunks(prepared.prompt.passages)
            return await stage.run(outcome.text, passages, deadline=room.deadline, chunks=chunks)

        learned = {"attributed": 1.0}  # the model's own labels, or a skip, teach nothing
        return await session.run(
            StageName.ATTRIBUTE, attribute, units=lambda done: learned.get(done.method, 0.0)
        )

    async def _generate(self, prepared: Prepared) -> AsyncGenerator[AnswerEvent, None]:
        """The generate and moderate.answer stages: moderated deltas, then the outcome."""
        session, plan = prepared.session, prepared.plan
        ledger = session.ledger
        answer_filter = self.stages.moderate_answer.open()
        stage = ledger.begin(
            StageName.GENERATE, **self.stages.generate.span_attributes(plan.max_output_tokens)
        )
        span = stage.span
        session.begin(StageName.GENERATE, span)
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
                reserve_ms=session.generation_reserve_ms(),
                stop_at=session.stop_at,
                span=span,
            )
            async with aclosing(events):
                async for event in events:
                    if isinstance(event, Generated):
                        generated = event
                        break
                    if isinstance(event, RouteDecision):
                        session.routed(event.target, event.degradation, span)
                        continue
                    if ttft_ms is None:
                        ttft_ms = ledger.spent_ms
                        record_first_token(span, ttft_ms, self.settings.ttft_target_ms)
                    released = answer_filter.feed(event.text)
                    if released:
                        text.append(released)
                        yield AnswerDelta(released)
            assert generated is not None, "the generate stage ends with its result"
            session.generation_ended(
                generated, span, shared_prefix_tokens=self.stages.assemble.shared_prefix_tokens
            )
            if ttft_ms is None and generated.finish_reason in ("deadline", "yielded"):
                raise BudgetExhausted("no answer token came before the deadline")
            ledger.charge(StageName.MODERATE_ANSWER, answer_filter.elapsed_ms)
            with ledger.stage(StageName.MODERATE_ANSWER) as tail_span:
                tail = await self.stages.moderate_answer.run(answer_filter)
                tail.record(tail_span)
            session.observe_ms(StageName.MODERATE_ANSWER, tail.total_ms)
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
                finish_reason=finish_reason(generated, error),
                ttft_ms=ttft_ms,
                redactions=dict(answer_filter.redactions),
            )
            record_generation_end(
                span, outcome.finish_reason, ttft_ms, outcome.usage, answer_filter.elapsed_ms
            )
            stage.end(error if isinstance(error, Exception) else None)
        yield AnswerDone(outcome)
