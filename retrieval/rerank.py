"""Reranking: a sentence-transformers cross-encoder scores (query, passage) pairs.

No cross-encoder ships offline, so ``load()`` raises ``RerankerUnavailable`` when none is
configured or the configured one cannot be loaded (a hub id not in the local cache fails fast
instead of waiting on the network); the app then skips the stage.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

from retrieval._offline import hub_kwargs, local_or_id
from retrieval.errors import RerankerUnavailable
from retrieval.passages import Passage


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

    def rerank(self, query: str, passages: Sequence[Passage], top_n: int) -> RerankResult:
        """The ``top_n`` of ``passages`` by cross-encoder score, best first."""
        model = self._model
        if model is None:
            raise RerankerUnavailable("the cross-encoder is not loaded")
        if not passages:
            return RerankResult([], 0)
        try:
            scores = model.predict(
                [(query, p.text) for p in passages], show_progress_bar=False, convert_to_numpy=True
            )
        except Exception as exc:
            raise RerankerUnavailable(f"reranking failed: {_first_line(exc)}") from exc
        scored = [
            dataclasses.replace(p, rerank_score=float(s))
            for p, s in zip(passages, scores, strict=True)
        ]
        scored.sort(key=lambda p: p.rerank_score or 0.0, reverse=True)  # stable: ties keep order
        return RerankResult(scored[: max(top_n, 0)], len(passages))
