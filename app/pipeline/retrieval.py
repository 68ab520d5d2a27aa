"""The retrieval half of a question: embed, then dense search, keyword search or both (as the
``Query``'s mode says), then the plan, then rerank (the rankings fused first), each stage handed
to the request's budget session.

The stages decide what is theirs: how much a query's words weigh and how the two rankings are
fused (``app.stages.retrieval``, ``app.stages.rerank``); the session decides how deep each search
looks, whether the keyword side is worth its time and how many candidates rerank scores. This
module runs them in order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.stages import Candidates, Embedded, Found, KeywordFound, Query, Stages, Vectorised
from retrieval import Passage
from tracing.budget import BudgetSession, Plan


@dataclass(frozen=True)
class Retrieved:
    """A question's passages, its vector (which pruning weighs sentences by; None when a
    keyword search did not need it), and the plan made after search."""

    passages: list[Passage]
    vector: np.ndarray | None
    plan: Plan


class Retrieval:
    """A question's passages, from the services' stages."""

    def __init__(self, stages: Stages) -> None:
        self.stages = stages

    async def find(
        self, query: Query, session: BudgetSession, *, need_vector: bool = True
    ) -> Retrieved:
        """The passages, the query's vector (unless a keyword search does not ``need_vector``)
        and the plan."""
        stages = self.stages
        stages.search.check(query.collection, query.search_filter)
        embedded: Embedded | None = None
        dense: Found | None = None
        if query.by_vectors:
            embedded = await session.run(stages.embed, query)
            dense = await session.run(stages.search, Vectorised(query, embedded))
        elif need_vector:
            embedded = await session.run(stages.embed, query)
        keyword: KeywordFound | None = None
        if query.by_words and (query.words_required or session.keeps(stages.keyword)):
            keyword = await session.run(stages.keyword, query)
        plan = session.plan()
        reranked = await session.run(stages.rerank, Candidates(query, dense, keyword))
        vector = embedded.vector if embedded is not None else None
        return Retrieved(reranked.passages, vector, plan)
