"""An embedder double: words hashed into a small normalised vector, no model, no torch.

Deterministic within a process and fast, so an app can ingest and search without loading
MiniLM. Texts that share words get close vectors; that is all a plumbing test needs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from zlib import crc32

import numpy as np

from retrieval import Embedder

DIM = 64


class HashEmbedder(Embedder):
    """A bag of hashed words in ``DIM`` dimensions, each row of norm 1."""

    def __init__(self) -> None:
        super().__init__("hash-embedder")
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
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, crc32(word.encode()) % DIM] += 1.0
            norm = float(np.linalg.norm(out[row]))
            out[row] = out[row] / norm if norm else 1.0 / np.sqrt(DIM)
        return out
