"""The retrieval half of a question: embed, then dense search, keyword search or both (the
request's mode, else ``RAGTIME_SEARCH_MODE``), then the plan, then rerank, each stage through
the request's budget session.

The stages decide what is theirs: how much a query's words weigh and how the two rankings are
fused (``app.stages.retrieval``); the session decides how deep each search looks, whether the
keyword side is worth its time and how many candidates rerank scores. This module runs them in
order.
"""

from __future__ import annotations

import numpy as np

from app.pipeline.services import Services
from app.settings import SearchMode
from app.stages import Embedded, Found, KeywordFound, Stages, found_candidates
from retrieval import Passage, SearchFilter
from tracing.budget import BudgetSession, StageName


class Retrieval:
    """A question's passages, from the services' stages."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.stages: Stages = services.stages
        self.settings = services.settings

    async def find(
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
        stages.search.check(collection, search_filter)
        depth = session.search_depth(k=k, rerank_available=stages.rerank.available)
        embedded: Embedded | None = None
        if mode != "keyword" or need_vector:
            embedder = self.services.embedders_for(collection)
            embedded = await session.run(
                StageName.EMBED,
                lambda by: stages.embed.embed_question(query, deadline=by, embedder=embedder),
            )
        dense: Found | None = None
        if mode != "keyword" and embedded is not None:
            vector, backend = embedded.vector, embedded.backend
            dense = await session.run(
                StageName.SEARCH,
                lambda by: stages.search.search_vectors(
                    collection, vector, depth,
                    deadline=by, search_filter=search_filter, backend=backend,
                ),
            )  # fmt: skip
        weight = stages.keyword.weight(query, mode)
        keyword: KeywordFound | None = None
        if weight and (mode == "keyword" or self.keyword_side(session, k)):
            keyword = await session.run(
                StageName.KEYWORD,
                lambda by: stages.keyword.search_words(
                    collection, query, depth, deadline=by, search_filter=search_filter
                ),
            )
        candidates = found_candidates(mode, dense, keyword, depth)
        plan = session.plan(k=k, rerank_available=stages.rerank.available)
        reranked = await session.run(
            StageName.RERANK,
            lambda by: stages.rerank.rerank_passages(
                query, candidates, k=k, candidates=plan.rerank_candidates, deadline=by
            ),
            runs=bool(candidates),
            units=lambda reranked: reranked.scored,
        )
        return reranked.passages, embedded.vector if embedded is not None else None

    def keyword_side(self, session: BudgetSession, k: int) -> bool:
        """Whether hybrid search runs its keyword side for a query whose words weigh in the
        fusion: when the budget finds it worth its time; when not, the skip is a degradation,
        said on the keyword span."""
        action = session.keyword_side(k=k, rerank_available=self.stages.rerank.available)
        if action is not None:
            session.skip(action)
        return action is None
