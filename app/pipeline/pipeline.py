"""The request pipeline: the stages of one question (``app.stages``), in order, each handed to
the request's budget session (``BudgetSession.run(stage, inputs)``).

moderate.question -> the retrieval half (``app.pipeline.retrieval``: embed -> search, keyword or
both -> plan -> rerank, the rankings fused first) -> moderate.passages (passages that carry
instructions for the model are quarantined) -> assemble -> the answer stream
(``app.pipeline.answering``: generate, the answer filtered as it streams -> moderate.answer)
-> attribute (which passages the final answer cites: its own ``[n]`` labels, else its sentences
attributed by similarity; skipped, and said so, when the budget has no time left for it).
Retrieval-only requests stop after rerank.

The pipeline runs the stages and plans nothing: each request's budget session
(``tracing.budget.session``) admits it, plans it after search, holds its generation time at the
target until the answer ends, says how long each stage may wait, and learns what each cost. A
stage that fails other than generation (a reranker error) is skipped as a degradation. A
request's state is its ``BudgetLedger``, its session, and the events it yields.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from app.pipeline.answering import Answering
from app.pipeline.events import (
    AnswerDelta,
    AnswerDone,
    AnswerOutcome,
    AnswerReplaced,
    PipelineEvent,
    Prepared,
)
from app.pipeline.retrieval import Retrieval
from app.pipeline.services import Services
from app.settings import AnswerMode, SearchMode, default_answer_mode
from app.stages import Answered, Evidence, Fallback, Packing, Query
from retrieval import Passage, SearchFilter
from tracing.budget import BudgetSession, DeadlinePassed


class Pipeline:
    """Runs a request's stages in order, in their spans, within its budget."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.stages = services.stages
        self.settings = services.settings
        self.retrieval = Retrieval(self.stages)
        self.answering = Answering(self.stages, least_tokens=self.settings.min_output_tokens)

    def query(
        self,
        text: str,
        collection: str,
        k: int,
        *,
        search_filter: SearchFilter | None = None,
        mode: SearchMode | None = None,
    ) -> Query:
        """What a request searches for; in ``mode``, default the setting's."""
        return Query(text, collection, k, mode or self.settings.search_mode, search_filter)

    # -- retrieval -------------------------------------------------------------------------

    async def retrieve(self, query: Query, session: BudgetSession) -> list[Passage]:
        """Embed, search and rerank (sized to the budget of the request's ``session``):
        ``query``'s ``k`` best passages."""
        session.ask(k=query.k, rerank_available=self.stages.rerank.available)
        with session:
            found = await self.retrieval.find(query, session, need_vector=False)
        return found.passages

    # -- answering -------------------------------------------------------------------------

    def mode_for(self, asked: AnswerMode | None) -> AnswerMode:
        """Who writes an answer: the request's choice, else the setting's, else the backend's
        measured default (``app.settings.answers``)."""
        settings = self.settings
        return asked or settings.answer_mode or default_answer_mode(settings.generation_backend)

    async def answer(
        self,
        question: str,
        collection: str,
        top_k: int,
        session: BudgetSession,
        *,
        max_output_tokens: int | None = None,
        mode: AnswerMode | None = None,
    ) -> AsyncGenerator[PipelineEvent, None]:
        """A ``Prepared`` first (the question screened, its passages, the plan, the prompt and
        the evidence weighed), then ``AnswerDelta`` events of moderated text, then one
        ``AnswerDone``; decoding stops at the deadline. The plan keeps the caller's
        ``max_output_tokens`` when smaller than what the budget allows. Passages too far from
        the question abstain, with no model call; ``mode`` says who writes the answer
        (``mode_for``), and in ``auto`` the passages' own answer replaces one the deadline cut
        short or the passages do not bear out (an ``AnswerReplaced`` when text was sent).
        Closing this early (a client gone) closes the backend's stream, which stops decoding,
        and no ``AnswerDone`` follows. Failures raise."""
        stages = self.stages
        self.services.require_generator()
        mode = self.mode_for(mode)
        query = self.query(question, collection, top_k)
        session.ask(
            k=top_k,
            rerank_available=stages.rerank.available,
            question=question,
            serving=self.services.backend if mode != "extract" else None,
            output_cap=max_output_tokens,
            extract_instead=mode != "generate",
        )
        model = stages.generate.backend.model
        outcome = AnswerOutcome(finish_reason="skipped", model=model)
        sent = False
        with session:  # the generation time held at the target is given back as the answer ends
            await session.run(stages.screen_question, question)
            found = await self.retrieval.find(query, session)
            kept = await session.run(stages.screen_passages, found.passages)
            packing = Packing(question, kept.passages, found.vector)
            assembled = await session.run(stages.assemble, packing)
            evidence = Evidence(question, found.vector, assembled.prompt.passages)
            extracted = await session.run(stages.extract, evidence)
            prepared = Prepared(
                question, kept.passages, assembled, found.plan, kept.quarantined, extracted, mode
            )
            yield prepared
            if prepared.from_evidence:
                outcome = await self._moderated(AnswerOutcome.from_evidence(extracted), session)
                yield AnswerDelta(outcome.text)
            elif prepared.generates:
                try:
                    async with aclosing(self.answering.stream_events(prepared, session)) as events:
                        async for event in events:
                            if isinstance(event, AnswerDone):
                                outcome = event.outcome
                                break
                            sent = True
                            yield event
                except DeadlinePassed as exc:
                    if mode != "auto":
                        raise
                    outcome = await self._instead(prepared, session, f"{exc}")
                    yield AnswerReplaced(outcome.text) if sent else AnswerDelta(outcome.text)
        outcome.answerable = outcome.answerable and prepared.answerable
        outcome.similarity = extracted.similarity
        answered = Answered(question, outcome.text, prepared.prompt.passages, outcome.written_by)
        outcome.attribution = await session.run(stages.attribute, answered)
        if mode == "auto" and outcome.written_by == "generate" and not outcome.attribution.grounded:
            reason = "the model's answer is not borne out by the passages"
            outcome = await self._instead(prepared, session, reason)
            yield AnswerReplaced(outcome.text)
            answered = Answered(question, outcome.text, prepared.prompt.passages, "extract")
            outcome.attribution = await session.run(stages.attribute, answered)
        yield AnswerDone(outcome)

    async def _instead(self, prepared: Prepared, session: BudgetSession, why: str) -> AnswerOutcome:
        """``auto``'s turn to the passages' own answer, said as the extract stage's
        degradation."""
        assert prepared.extracted is not None, "an answer weighs its evidence before generation"
        extracted = await session.run(self.stages.extract, Fallback(prepared.extracted, why))
        return await self._moderated(AnswerOutcome.from_evidence(extracted), session)

    async def _moderated(self, outcome: AnswerOutcome, session: BudgetSession) -> AnswerOutcome:
        """An answer taken from the passages, through the answer filter as the model's is
        (personal data redacted, profanity masked)."""
        answer_filter = self.stages.moderate_answer.open()
        released = answer_filter.feed(outcome.text)
        tail = await session.run(self.stages.moderate_answer, answer_filter)
        outcome.text, outcome.redactions = released + tail.text, dict(answer_filter.redactions)
        return outcome
