"""An embedder double: words hashed into a normalised vector, no model, no torch.

Deterministic (across processes too: ``crc32``, not ``hash``) and fast, so an app can ingest
and search without loading MiniLM. Function words are left out, so texts that share content
words get close vectors and a question about lists finds passages about lists: enough for the
tests that need sensible passages, not for any test of retrieval quality (that is MiniLM's, in
the ``slow`` tests).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any
from zlib import crc32

import numpy as np

from retrieval import Embedder

DIM = 256
#: Words that every question and passage shares, and that would otherwise decide the ranking.
STOP_WORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from",
        "how", "i", "if", "in", "is", "it", "its", "of", "on", "or", "that", "the", "this",
        "to", "what", "when", "which", "with", "you", "your",
    }
)  # fmt: skip


class HashEmbedder(Embedder):
    """A bag of hashed content words in ``DIM`` dimensions, each row of norm 1.

    ``delay_s`` makes each ``embed`` call take that long, as a model's does, for a test that
    checks where embedding runs (never on the event loop).
    """

    def __init__(self, *, delay_s: float = 0.0) -> None:
        super().__init__("hash-embedder")
        self.delay_s = delay_s
        self._loaded = False

    def load(self) -> None:
        self._loaded = True

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if self.delay_s:
            time.sleep(self.delay_s)
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                if word not in STOP_WORDS:
                    out[row, crc32(word.encode()) % DIM] += 1.0
            norm = float(np.linalg.norm(out[row]))
            out[row] = out[row] / norm if norm else 1.0 / np.sqrt(DIM)
        return out


class CountingEmbedder(HashEmbedder):
    """A ``HashEmbedder`` that records every text it embeds (``texts``), for tests of what an
    incremental ingest embeds again and what it reuses."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += list(texts)
        return super().embed(texts)


def hash_embedder_of(settings: Any) -> HashEmbedder:
    """A ``HashEmbedder`` that says it is of ``settings.embedding_backend``: in place of
    ``app.pipeline.services.default_embedder``, for tests of which backend a collection gets."""
    embedder = HashEmbedder()
    embedder.backend = settings.embedding_backend
    return embedder
