"""The stages of one request, each a small component with one job.

``warm_up()`` loads what the stage needs (models, the index), once, before traffic; an async
``run(inputs, allowance)`` does the stage's work for one request and returns a dataclass
(``tracing.budget.stage``: the allowance says until when it may run, how deep a search looks and
what the plan gives it; generation streams its text, then its result). Blocking work runs on the
stage's own threads (``threads``), waited for no later than the allowance's deadline. No stage
knows about HTTP or makes plans: the pipeline (``app.pipeline``) hands them, in order, to the
request's budget session (``BudgetSession.run(stage, inputs)``).

    screen question -> embed -> search (dense) and/or keyword (BM25) -> rerank (fused first)
    -> screen passages -> assemble -> extract (can the passages answer? their own answer)
    -> generate
    -> moderate answer -> attribute (the passages the answer cites)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from app.safety.moderation import Moderator
from app.settings import Settings, usable_cores
from app.stages.attribution import Answered, Attribute, Attributed
from app.stages.extraction import ABSTENTION, Evidence, ExtractAnswer, Extracted, Fallback
from app.stages.generation import (
    Assembled,
    AssemblePrompt,
    Generate,
    Generated,
    GenerateEvent,
    Packing,
)
from app.stages.moderation import (
    ModerateAnswer,
    ModeratedTail,
    Quarantined,
    Screened,
    ScreenedPassages,
    ScreenPassages,
    ScreenQuestion,
)
from app.stages.rerank import Candidates, Rerank, Reranked
from app.stages.retrieval import (
    Embedded,
    EmbedQuestion,
    Found,
    KeywordFound,
    KeywordSearch,
    Query,
    SearchIndex,
    Vectorised,
    found_candidates,
)
from app.stages.threads import StageThreads
from inference import GenerationBackend
from retrieval import DocumentStore, Embedder, Embedders, Reranker, RerankerUnavailable
from tracing.budget import CostModel, StageName

log = logging.getLogger(__name__)

#: Worker threads per stage. A model stage gets one: torch already spreads one call over the
#: cores, and the classifier holds the GIL, so a second thread only splits the same cores, while
#: with one, the questions that arrive while it works go together in its next batch. FAISS
#: searches release the GIL and take several: as many as the cores, 2 to 4. A thread beyond the
#: cores searches nothing in parallel; it is one more thread taking turns at the GIL, ahead of the
#: read-ahead thread's refusals (docs/studies/front-door.md, "make bench on a slower machine"). Work
#: abandoned at a deadline holds a thread of its own stage only.
STAGE_WORKERS = {
    StageName.MODERATE_QUESTION: 1,
    StageName.EMBED: 1,
    StageName.SEARCH: max(2, min(4, usable_cores())),
    StageName.KEYWORD: 2,
    StageName.RERANK: 1,
    StageName.MODERATE_PASSAGES: 1,
    StageName.ASSEMBLE: 2,
    StageName.ATTRIBUTE: 1,
}

__all__ = [
    "ABSTENTION",
    "STAGE_WORKERS",
    "Answered",
    "AssemblePrompt",
    "Assembled",
    "Attribute",
    "Attributed",
    "Candidates",
    "EmbedQuestion",
    "Embedded",
    "Evidence",
    "ExtractAnswer",
    "Extracted",
    "Fallback",
    "Found",
    "Generate",
    "GenerateEvent",
    "Generated",
    "KeywordFound",
    "KeywordSearch",
    "ModerateAnswer",
    "ModeratedTail",
    "Packing",
    "Quarantined",
    "Query",
    "Rerank",
    "Reranked",
    "ScreenPassages",
    "ScreenQuestion",
    "Screened",
    "ScreenedPassages",
    "SearchIndex",
    "StageThreads",
    "Stages",
    "Vectorised",
    "found_candidates",
]


class WarmsUp(Protocol):
    """A stage as start-up sees it (``warm_up``); what it is to the budget is
    ``tracing.budget.Stage``."""

    name: StageName
    component: str
    """The part of the service it loads, as ``/readyz`` names it."""

    async def warm_up(self) -> None: ...


@dataclass(frozen=True)
class Stages:
    """Every stage of a request, in the order they run."""

    screen_question: ScreenQuestion
    embed: EmbedQuestion
    search: SearchIndex
    keyword: KeywordSearch
    rerank: Rerank
    screen_passages: ScreenPassages
    assemble: AssemblePrompt
    extract: ExtractAnswer
    generate: Generate
    moderate_answer: ModerateAnswer
    attribute: Attribute

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        store: DocumentStore,
        embedders: Embedders,
        reranker: Reranker,
        backend: GenerationBackend,
        moderator: Moderator,
        costs: CostModel,
    ) -> Stages:
        """The stages over these components, each with its own threads, which read and teach
        ``costs`` (the process's cost model); nothing loads yet."""

        def threads(stage: StageName) -> StageThreads:
            nice = settings.attribution_nice if stage == StageName.ATTRIBUTE else 0
            return StageThreads(stage, STAGE_WORKERS[stage], nice=nice, costs=costs)

        def embedder_for(collection: str) -> Embedder:
            """The embedder of ``collection``'s vectors (the configured one for a new one)."""
            return embedders.for_collection(store, collection)

        return cls(
            screen_question=ScreenQuestion(moderator, threads(StageName.MODERATE_QUESTION)),
            embed=EmbedQuestion(embedders, threads(StageName.EMBED), embedder_for=embedder_for),
            search=SearchIndex(store, threads(StageName.SEARCH)),
            keyword=KeywordSearch(store, threads(StageName.KEYWORD)),
            rerank=Rerank(
                reranker,
                threads(StageName.RERANK),
                batch_size=settings.rerank_batch_size,
                delay_ms_per_pair=settings.fault_rerank_delay_ms,
            ),
            screen_passages=ScreenPassages(threads(StageName.MODERATE_PASSAGES)),
            assemble=AssemblePrompt(
                backend,
                threads(StageName.ASSEMBLE),
                context_tokens=settings.context_tokens,
                layout=settings.prompt_layout,
                stored_rows=store.sentence_rows,
            ),
            extract=ExtractAnswer(
                min_similarity=settings.answerable_threshold,
                stored_rows=store.sentence_rows,
            ),
            generate=Generate(
                backend,
                temperature=settings.temperature,
                penalties=settings.penalties(),
                stop_on_repetition=settings.stop_on_repetition,
                token_delay_ms=settings.fault_generate_token_delay_ms,
            ),
            moderate_answer=ModerateAnswer(moderator),
            # The question embedder, shared: attribution loads no second model.
            attribute=Attribute(
                embedders,
                threads(StageName.ATTRIBUTE),
                threshold=settings.attribution_threshold,
                stored_rows=store.sentence_rows,
                embedder_for=embedder_for,
            ),
        )

    async def warm_up(self) -> dict[str, str]:
        """Warm every stage up, in an order that lets each find what it needs (the prompt
        needs the started backend's tokenizer). Returns what failed, by component; a missing
        cross-encoder is not a failure: reranking is off (``rerank.status`` says why)."""
        problems: dict[str, str] = {}
        order: list[WarmsUp] = [
            self.search,
            self.keyword,
            self.embed,
            self.screen_question,
            self.screen_passages,
            self.generate,
            self.assemble,
        ]
        for stage in order:
            if stage.component in problems:
                continue  # the prompt cannot be assembled without the backend that failed
            try:
                await stage.warm_up()
            except Exception as exc:
                problems[stage.component] = f"{type(exc).__name__}: {exc}"
                log.error("could not load %s: %s", stage.component, exc)
        try:
            await self.rerank.warm_up()
        except RerankerUnavailable as exc:
            if self.rerank.reranker.configured:
                self.rerank.status = f"skipped: {exc}"
                log.warning("reranking is off: %s", exc)
            else:
                self.rerank.status = "off: none configured"
        return problems

    def close(self) -> None:
        for stage in (
            self.screen_question,
            self.embed,
            self.search,
            self.keyword,
            self.rerank,
            self.screen_passages,
            self.assemble,
            self.attribute,
        ):
            stage.threads.close()
