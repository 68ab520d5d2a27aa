"""A reranker double: a cross-encoder stand-in scoring by shared words, slow or failing on cue."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Sequence

from retrieval import Passage, Reranker, RerankerUnavailable, RerankResult

_WORD = re.compile(r"\w+")


class WordOverlapReranker(Reranker):
    """Scores a passage by the question's words it contains; ``delay_s`` per call, or
    ``fail_with`` raised, on cue. ``load()`` fails when ``loadable`` is False, as a missing
    cross-encoder does."""

    def __init__(
        self,
        *,
        delay_s: float = 0.0,
        fail_with: Exception | None = None,
        loadable: bool = True,
    ) -> None:
        super().__init__("word-overlap")
        self.delay_s = delay_s
        self.fail_with = fail_with
        self.loadable = loadable
        self.calls = 0
        self._ready = False

    def load(self) -> None:
        if not self.loadable:
            raise RerankerUnavailable("no cross-encoder configured (set RAGTIME_RERANKER_MODEL)")
        self._ready = True

    @property
    def available(self) -> bool:
        return self._ready

    def rerank(self, query: str, passages: Sequence[Passage], top_n: int) -> RerankResult:
        self.calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.fail_with is not None:
            raise self.fail_with
        asked = {w.lower() for w in _WORD.findall(query)}
        scored = [
            dataclasses.replace(
                p, rerank_score=float(len(asked & {w.lower() for w in _WORD.findall(p.text)}))
            )
            for p in passages
        ]
        scored.sort(key=lambda p: p.rerank_score or 0.0, reverse=True)
        return RerankResult(scored[:top_n], len(passages))
