"""A reranker double: the real ``retrieval.Reranker`` over a stand-in cross-encoder, no torch.

``OverlapReranker.load()`` puts an ``OverlapCrossEncoder`` where ``Reranker.load()`` would put
``sentence_transformers.CrossEncoder`` (which takes seconds to import), so ``rerank()`` is the
real code (scoring, ordering, ``top_n``) and only the model is stood in for. The scores are the
share of the question's words that a passage holds: predictable, where the tiny random
cross-encoder's are noise. A test of the real cross-encoder loads that one (``slow``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from retrieval import Reranker, RerankerUnavailable


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class OverlapCrossEncoder:
    """Stands in for ``CrossEncoder.predict``: a (question, passage) pair scores the share of
    the question's words found in the passage. ``fail_with`` is raised instead, when given;
    ``delay_s`` is slept first, as a slow model takes its time."""

    def __init__(self, fail_with: Exception | None = None, delay_s: float = 0.0) -> None:
        self.fail_with = fail_with
        self.delay_s = delay_s
        self.pairs_scored = 0

    def predict(self, pairs: Sequence[tuple[str, str]], **kwargs: Any) -> np.ndarray:
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.fail_with is not None:
            raise self.fail_with
        self.pairs_scored += len(pairs)
        scores = [len(_words(q) & _words(p)) / max(len(_words(q)), 1) for q, p in pairs]
        return np.asarray(scores, dtype=np.float32)


class OverlapReranker(Reranker):
    """A ``Reranker`` named ``name`` whose model is an ``OverlapCrossEncoder``.

    ``load_error``: ``load()`` raises ``RerankerUnavailable`` with it, as for a cross-encoder
    that cannot be loaded. ``fail_with``: every scoring call raises it, as a broken model would.
    ``delay_s``: every scoring call takes that long first.
    """

    def __init__(
        self,
        name: str = "overlap-cross-encoder",
        *,
        load_error: str | None = None,
        fail_with: Exception | None = None,
        delay_s: float = 0.0,
    ) -> None:
        super().__init__(name)
        self.load_error = load_error
        self.cross_encoder = OverlapCrossEncoder(fail_with, delay_s)

    def load(self) -> None:
        if self.load_error is not None:
            raise RerankerUnavailable(self.load_error)
        self._model = self.cross_encoder
