"""Reranking: a sentence-transformers cross-encoder scores (query, passage) pairs.

No cross-encoder ships offline, so ``load()`` raises ``RerankerUnavailable`` when none is
configured or the configured one cannot be loaded (a hub id not in the local cache fails fast
instead of waiting on the network); the app then skips the stage.

A ``RerankRound`` reranks within a share of time: the candidates are scored in small batches,
best-first in the order retrieval found them, while the next batch is predicted to end before
the share does; the scored ones are then ordered by the cross-encoder, ahead of the rest in
their found order. The rerank stage drives it on its threads, ``ragtime eval retrieval``
(``--rerank-budgets``) in a loop, with the same arithmetic.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import Any

from retrieval.errors import RerankerUnavailable
from retrieval.model_hub import hub_kwargs, local_or_id
from retrieval.search.passages import Passage


@dataclasses.dataclass(frozen=True)
class RerankResult:
    passages: list[Passage]  # the top_n, by rerank_score descending, rerank_score set
    candidates: int  # how many passages were scored


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


class Reranker:
    """A cross-encoder by hub id or local path; ``None`` or "" means none is configured."""

    def __init__(self, model: str | None, *, device: str = "cpu") -> None:
        self._name = model or None
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def available(self) -> bool:
        return self._model is not None

    @property
    def model_name(self) -> str | None:
        return self._name

    @property
    def configured(self) -> bool:
        """Whether a cross-encoder was chosen at all (without one, reranking is simply off)."""
        return self._name is not None

    def load(self) -> None:
        """Load the cross-encoder (idempotent), or raise ``RerankerUnavailable`` saying why."""
        with self._lock:
            if self._model is not None:
                return
            if self._name is None:
                raise RerankerUnavailable(
                    "no cross-encoder configured (set RAGTIME_RERANKER_MODEL)"
                )
            try:
                from sentence_transformers import CrossEncoder

                self._model = CrossEncoder(
                    local_or_id(self._name), device=self.device, **hub_kwargs(self._name)
                )
            except Exception as exc:
                raise RerankerUnavailable(
                    f"cross-encoder {self._name!r} could not be loaded: {_first_line(exc)}"
                ) from exc

    def score(self, query: str, passages: Sequence[Passage]) -> list[Passage]:
        """``passages`` in their order, each with its cross-encoder ``rerank_score``."""
        model = self._model
        if model is None:
            raise RerankerUnavailable("the cross-encoder is not loaded")
        if not passages:
            return []
        try:
            scores = model.predict(
                [(query, p.text) for p in passages], show_progress_bar=False, convert_to_numpy=True
            )
        except Exception as exc:
            raise RerankerUnavailable(f"reranking failed: {_first_line(exc)}") from exc
        return [
            dataclasses.replace(p, rerank_score=float(s))
            for p, s in zip(passages, scores, strict=True)
        ]

    def rerank(self, query: str, passages: Sequence[Passage], top_n: int) -> RerankResult:
        """The ``top_n`` of ``passages`` by cross-encoder score, best first."""
        scored = by_rerank_score(self.score(query, passages))
        return RerankResult(scored[: max(top_n, 0)], len(passages))

    def rerank_within(
        self,
        query: str,
        passages: Sequence[Passage],
        top_n: int,
        *,
        share_s: float,
        batch_size: int = 8,
        ms_per_pair: float | None = None,
    ) -> RerankResult:
        """The ``top_n`` of ``passages`` reranked within ``share_s`` seconds from now (a
        ``RerankRound`` driven here, on the caller's thread)."""
        deadline = time.perf_counter() + share_s
        round_ = RerankRound(list(passages), batch_size, ms_per_pair)
        while (batch := round_.next_batch(deadline)) is not None:
            started = time.perf_counter()
            round_.add(self.score(query, batch), time.perf_counter() - started)
        return RerankResult(round_.ranked()[: max(top_n, 0)], round_.scored)


def by_rerank_score(passages: Sequence[Passage]) -> list[Passage]:
    """``passages`` by ``rerank_score``, best first; ties keep their order (a stable sort)."""
    return sorted(passages, key=lambda p: p.rerank_score or 0.0, reverse=True)


class RerankRound:
    """One query's candidates (best first, as retrieval found them) scored in batches of
    ``batch_size`` while time allows.

    ``next_batch(deadline)`` is the next batch, or None when every candidate is scored or the
    batch is predicted to end after ``deadline``: at the milliseconds per pair this round has
    measured, else at ``ms_per_pair`` (what earlier rounds measured), else (nothing known yet)
    the first batch is tried. ``ranked()`` is the scored candidates by cross-encoder score,
    then the rest in their found order.
    """

    def __init__(
        self, candidates: list[Passage], batch_size: int, ms_per_pair: float | None = None
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.candidates = candidates
        self.batch_size = batch_size
        self.prior_ms_per_pair = ms_per_pair
        self._scored: list[Passage] = []
        self._seconds = 0.0

    @property
    def scored(self) -> int:
        return len(self._scored)

    @property
    def complete(self) -> bool:
        return self.scored >= len(self.candidates)

    @property
    def ms_per_pair(self) -> float | None:
        """Measured in this round, else the prior."""
        if self._scored:
            return self._seconds * 1000.0 / len(self._scored)
        return self.prior_ms_per_pair

    def next_batch(self, deadline: float) -> list[Passage] | None:
        batch = self.candidates[self.scored : self.scored + self.batch_size]
        if not batch:
            return None
        rate = self.ms_per_pair
        predicted_s = rate * len(batch) / 1000.0 if rate is not None else 0.0
        if time.perf_counter() + predicted_s > deadline:
            return None
        return batch

    def add(self, scored: Sequence[Passage], seconds: float) -> None:
        """A batch's passages as ``Reranker.score`` returned them, and how long it took."""
        self._scored.extend(scored)
        self._seconds += seconds

    def ranked(self) -> list[Passage]:
        return by_rerank_score(self._scored) + self.candidates[self.scored :]
