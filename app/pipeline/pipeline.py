"""The request pipeline: the stages of one question (``app.stages``), in order, each through
the request's budget session (``BudgetSession.run``).

moderate.question -> the retrieval half (``app.pipeline.retrieval``: embed -> search, keyword or
both fused -> plan -> rerank) -> moderate.passages (passages that carry instructions for the
model are quarantined) -> assemble -> the answer stream (``app.pipeline.answering``:
generate, the answer filtered as it streams -> moderate.answer) -> attribute (which passages the
final answer cites: its own ``[n]`` labels, else its sentences attributed by similarity; skipped,
and said so, when the budget has no time left for it). Retrieval-only requests stop after
rerank.

The pipeline runs the stages and plans nothing: each request's budget session
(``tracing.budget.session``) admits it, plans it after search, holds its generation time at the
target, says how long each stage may wait, and learns what each cost. A stage that fails other
than generation (a reranker error) is skipped as a degradation. A request's state is its
``BudgetLedger``, its ``Prepared`` (with the session) and the ``AnswerOutcome`` given back.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from app.frontdoor.shutdown import Shutdown
from app.pipeline.answering import Answering
from app.pipeline.events import AnswerDone, AnswerEvent, AnswerOutcome, Prepared
from app.pipeline.retrieval import Retrieval
from app.pipeline.services import Services
from app.settings import SearchMode
from app.stages import Attributed
from app.stages.attribution import kept_chunks
from retrieval import Passage, SearchFilter
from tracing.budget import BudgetEngine, BudgetLedger, BudgetSession, StageName


class Pipeline:
    """Runs a request's stages in order, in their spans, within its budget."""

    def __init__(self, services: Services, budget: BudgetEngine, *, shutdown: Shutdown) -> None:
        self.services = services
        self.shutdown = shutdown
        """The server's stop, which ends live streams at its grace (``app.http.answers.Drain``)."""
        self.stages = services.stages
        self.settings = services.settings
        self.budget = budget
        self.retrieval = Retrieval(services)
        self.answering = Answering(services)
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
        passages, _ = await self.retrieval.find(
            query, collection, k, session, search_filter, mode=mode, need_vector=False
        )
        return passages

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
        session.check_feasible()
        try:  # the plan holds its generation time at the target (``BudgetSession.plan``)
            await session.run(
                StageName.MODERATE_QUESTION,
                lambda by: stages.screen_question.screen_question(question, deadline=by),
            )
            passages, vector = await self.retrieval.find(question, collection, top_k, session)
            kept = await session.run(
                StageName.MODERATE_PASSAGES,
                lambda by: stages.screen_passages.screen_passages(passages, deadline=by),
            )
            plan = session.planned
            assembled = await session.run(
                StageName.ASSEMBLE,
                lambda by: stages.assemble.assemble_prompt(
                    question,
                    kept.passages,
                    context_tokens=plan.context_tokens,
                    deadline=by,
                    prune_for=vector if plan.prune else None,
                ),
            )
        except BaseException:
            session.release_reservation()
            raise
        return Prepared(question, kept.passages, assembled.prompt, session, kept.quarantined)

    async def generate(self, prepared: Prepared) -> AsyncGenerator[AnswerEvent, None]:
        """``AnswerDelta`` events of moderated text, then one ``AnswerDone``; decoding stops at
        the deadline. Closing this early (a client gone) closes the backend's stream, which
        stops decoding, and no ``AnswerDone`` follows. Failures raise."""
        outcome = AnswerOutcome(finish_reason="skipped")
        with prepared.session.holding():
            if prepared.with_answer:
                async with aclosing(self.answering.stream_events(prepared)) as events:
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
            # Grounding is judged however the citations were found (a few set operations),
            # in the stage, so that its span records it.
            found = await cited(by)
            return found.judged(prepared.question, outcome.text, passages.values())

        async def cited(by: float) -> Attributed:
            attributed = stage.by_model(outcome.text, set(passages))
            if attributed is not None:
                return attributed
            room = session.attribution()
            if not room.fits:
                return Attributed.skipped("attribution_skipped", room.reason)
            chunks = kept_chunks(prepared.prompt.passages)
            return await stage.attribute_answer(
                outcome.text, passages, deadline=room.deadline, chunks=chunks
            )

        # The model's own labels, or a skip, teach nothing of attribution's cost.
        learned = {"attributed": 1.0, "unattributed": 1.0}
        return await session.run(
            StageName.ATTRIBUTE, attribute, units=lambda done: learned.get(done.method, 0.0)
        )
