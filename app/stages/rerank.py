"""The rerank stage: what the searches found, fused into one ranking (hybrid search), and its
best candidates reordered by a cross-encoder, as many as fit the time the plan gives it, the
rest in the found order, and what was given up said."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from app.stages.result import StageResult
from app.stages.retrieval import Found, KeywordFound, Query, found_candidates
from app.stages.threads import StageThreads
from retrieval import Passage, Reranker, RerankRound
from tracing.budget import Allowance, DeadlinePassed, StageName


@dataclass(frozen=True)
class Reranked(StageResult):
    """The passages in their final order. ``scored`` is how many the cross-encoder scored (0
    when the found order stands) of the ``planned`` candidates; ``degradation`` says why fewer
    were scored than planned (``(action, reason)``), and ``error`` holds the reranker's
    exception, if it raised."""

    passages: list[Passage]
    scored: int = 0
    model: str | None = None
    degradation: tuple[str, str] | None = None
    error: BaseException | None = None
    planned: int = 0

    @property
    def units(self) -> int:
        """What its cost is learned over: the candidate pairs scored."""
        return self.scored

    def attributes(self) -> dict[str, str | int | bool]:
        if not self.scored:
            return {"ragtime.rerank.skipped": True}
        return {
            "ragtime.rerank.model": self.model or "",
            "ragtime.rerank.candidates": self.scored,
            "ragtime.rerank.planned": self.planned,
        }


@dataclass(frozen=True)
class Candidates:
    """What the searches of a query found: the dense ranking, the keyword one, or both."""

    query: Query
    dense: Found | None = None
    keyword: KeywordFound | None = None


class Rerank:
    """Reorders the best candidates with a cross-encoder, when one is loaded, within the time
    it is given: batches of ``batch_size`` candidates, best-first in the found order, while the
    next batch is predicted to end in time (``retrieval.RerankRound``, at the milliseconds per
    pair measured so far); the rest keep the found order, and it says so. A configured reranker
    that could not be loaded, fails, or scores nothing in its time leaves the found order, and
    says so; with none configured, the found order stands and nothing is said."""

    name = StageName.RERANK
    component = "reranker"

    def __init__(
        self,
        reranker: Reranker,
        threads: StageThreads,
        *,
        batch_size: int = 8,
        delay_ms_per_pair: float = 0.0,
    ) -> None:
        self.reranker = reranker
        self.threads = threads
        self.batch_size = batch_size
        self.delay_ms_per_pair = delay_ms_per_pair
        """A fault for benches and tests: a slower model, per scored pair."""
        self.status = "not loaded"

    @property
    def ms_per_pair(self) -> float:
        """Milliseconds per scored pair, the median of what the cost model has seen (its threads'
        model, the process's), which budget sessions teach from each rerank (its prior before)."""
        return self.threads.costs.rate(self.name, 0.5)

    async def warm_up(self) -> None:
        """Load the cross-encoder; raises ``RerankerUnavailable`` saying why not (reranking is
        then off, which is not a failure of the service)."""
        await asyncio.to_thread(self.reranker.load)
        self.status = f"loaded: {self.reranker.model_name}"

    @property
    def available(self) -> bool:
        return self.reranker.available

    async def run(self, found: Candidates, allowance: Allowance) -> Reranked:
        """The query's ``k`` best passages: the searches' rankings fused (as deep as they
        looked), then as many of the plan's rerank candidates scored as fit its deadline."""
        query = found.query
        candidates = found_candidates(query.mode, found.dense, found.keyword, allowance.depth)
        return await self.rerank_passages(
            query.text,
            candidates,
            k=query.k,
            candidates=allowance.planned.rerank_candidates,
            deadline=allowance.deadline,
        )

    async def rerank_passages(
        self, query: str, passages: list[Passage], *, k: int, candidates: int, deadline: float
    ) -> Reranked:
        """The ``k`` best of the first ``candidates`` passages, as many of them scored as fit
        before ``deadline`` (the found order's ``k`` best when ``candidates`` is 0)."""
        if not self.available:
            if not self.reranker.configured:  # configuration, not a saving: nothing to say
                return Reranked(passages[:k])
            return Reranked(passages[:k], degradation=("rerank_unavailable", self.status))
        if not candidates or not passages:
            return Reranked(passages[:k])
        pool = passages[:candidates]
        allowed_ms = (deadline - time.perf_counter()) * 1000.0
        round_ = RerankRound(pool, self.batch_size, self.ms_per_pair)
        try:
            while (batch := round_.next_batch(deadline)) is not None:
                started = time.perf_counter()
                scored = await self.threads.call(self._score, query, batch, deadline=deadline)
                round_.add(scored, time.perf_counter() - started)
        except DeadlinePassed:
            pass  # what was scored in time stands
        except Exception as exc:  # a reranker that fails is skipped: the found order stands
            reason = f"the reranker failed ({type(exc).__name__}: {exc}); found order kept"
            return Reranked(
                passages[:k], degradation=("rerank_failed", reason), error=exc, planned=len(pool)
            )
        if not round_.scored:
            reason = f"no batch of candidates fitted its {allowed_ms:.0f} ms; found order kept"
            return Reranked(passages[:k], degradation=("rerank_timeout", reason), planned=len(pool))
        degradation = None
        if not round_.complete:
            degradation = (
                "rerank_cut",
                f"{round_.scored} of {len(pool)} candidates scored in its {allowed_ms:.0f} ms; "
                "the rest keep the found order",
            )
        ranked = round_.ranked()[:k]
        return Reranked(
            ranked, round_.scored, self.reranker.model_name, degradation, None, len(pool)
        )

    def _score(self, query: str, batch: list[Passage]) -> list[Passage]:
        if self.delay_ms_per_pair:
            time.sleep(self.delay_ms_per_pair * len(batch) / 1000.0)
        return self.reranker.score(query, batch)
