"""The retrieval half of a question: embed, then dense search, keyword search or both fused by
reciprocal rank (the request's mode, else ``RAGTIME_SEARCH_MODE``), then the plan, then rerank,
each stage through the request's budget session.

How many candidates a search returns (enough for rerank to choose from), which searches a mode
runs, whether hybrid search's keyword side runs at all (a query whose words weigh in the fusion,
and a budget that finds it worth its time) and how the two rankings are fused are decided here,
so that the pipeline only runs the halves in order.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from app.http.errors import InvalidField
from app.pipeline.services import Services
from app.settings import SearchMode
from retrieval import InvalidFilter, Passage, SearchFilter, fuse_passages, keyword_weight
from tracing.budget import BudgetSession, StageName


class Retrieval:
    """A question's passages, from the services' stages."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.stages = services.stages
        self.settings = services.settings

    async def run(
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
        if mode == "keyword" or (mode == "hybrid" and self.keyword_side(session, query, k)):
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

    def keyword_side(self, session: BudgetSession, query: str, k: int) -> bool:
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
