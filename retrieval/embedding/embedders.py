"""One embedder per kind of vectors, so that each collection keeps the backend that built it.

A collection's vectors come from one embedding backend (its snapshot's manifest says which);
``torch`` and ``onnx`` give the same vectors, ``onnx-int8`` others. ``Embedders`` holds the
configured embedder (the backend new collections get) and makes one of another backend, of the
same model, the first time a collection built by it is searched, attributed or added to. So
switching the configured backend changes new collections only; an existing one changes when it
is rebuilt (``ragtime ingest PATH --collection NAME --rebuild``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from retrieval.embedding.embedder import Embedder, vector_family
from retrieval.errors import EmbeddingMismatch


class BuiltWith(Protocol):
    """What ``Embedders`` asks of a store (``DocumentStore`` fits)."""

    def snapshot(self, name: str) -> object | None: ...

    def embedding_backend_of(self, collection: str) -> str: ...


class Embedders:
    """The configured embedder, and one per other backend a collection was built with.

    ``make(backend)`` builds an embedder of the same model on ``backend`` (not loaded); without
    it (a test's single embedder) a collection of other vectors is an ``EmbeddingMismatch``.
    """

    def __init__(self, default: Embedder, make: Callable[[str], Embedder] | None = None) -> None:
        self.default = default
        self._make = make
        self._by_family: dict[str, Embedder] = {vector_family(default.backend): default}
        self._lock = threading.Lock()

    def for_backend(self, backend: str) -> Embedder:
        """The embedder giving ``backend``'s vectors (the configured one when it does)."""
        family = vector_family(backend)
        with self._lock:
            found = self._by_family.get(family)
            if found is None:
                if self._make is None:
                    raise EmbeddingMismatch(
                        f"vectors of the {backend!r} embedding backend are needed and only "
                        f"{self.default.backend!r} is configured",
                        collection="",
                        built_with=backend,
                        wanted=self.default.backend,
                    )
                found = self._by_family[family] = self._make(backend)
        return found

    def for_collection(self, store: BuiltWith, collection: str) -> Embedder:
        """The embedder of ``collection``'s vectors; the configured one for a new collection."""
        if store.snapshot(collection) is None:
            return self.default
        return self.for_backend(store.embedding_backend_of(collection))

    def all(self) -> list[Embedder]:
        """Every embedder made so far, the configured one first."""
        with self._lock:
            return list(self._by_family.values())
