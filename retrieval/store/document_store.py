"""The chunk store: named collections, each served from its current snapshot.

Each collection lives in versioned, immutable snapshot directories (``layout``: chunk table,
vectors, FAISS index, manifest) and a ``CURRENT`` pointer. A write builds the next snapshot
beside the current one and publishes it atomically (``writer``): ``writer()`` for many changes
in one snapshot (ingest), ``replace_source`` and ``drop_collection`` for one. A process that
crashes mid-write leaves the current snapshot served and intact. Readers hold no lock across a
search, and a snapshot another process published is picked up without a restart
(``served``). A data dir of the old layout (``chunks.sqlite3`` + ``faiss/<collection>.faiss``)
is migrated on ``open()`` (``legacy``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from retrieval.embedding.embedder import vector_family
from retrieval.errors import (
    BrokenIndex,
    EmbeddingMismatch,
    InvalidFilter,
)
from retrieval.ingest.chunking import Chunk
from retrieval.search.filters import SearchFilter
from retrieval.search.index_types import IndexSettings
from retrieval.search.passages import KeywordInfo, Passage, SearchInfo, passage_of_row
from retrieval.store.layout import collection_dir
from retrieval.store.legacy import migrate_legacy_layout
from retrieval.store.publishing import collection_lock, remove_half_built
from retrieval.store.sentences import ScoredPiece, scored_pieces
from retrieval.store.served import ServedSnapshots
from retrieval.store.snapshot import Snapshot
from retrieval.store.writer import SnapshotWriter

log = logging.getLogger(__name__)

_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: What a collection without a record (ingested before backends were recorded) was built with.
LEGACY_BACKEND = "torch"


def check_collection_name(name: str) -> None:
    if not _COLLECTION_NAME.match(name):
        raise ValueError(f"collection name {name!r} must be 1-64 letters, digits, '_', '.' or '-'")


#: The largest absolute score a search may return: cosine similarities of unit vectors lie in
#: [-1, 1]; IVF-PQ's approximate scores may stray a little past it, never far.
MAX_ABS_SCORE = 1.1


class DocumentStore(ServedSnapshots):
    """Chunks and their vectors, grouped in named collections, under ``root``.

    ``embedding_backend`` (and ``embedding_model``) name the embedder whose vectors this object
    writes and searches with unless a call names another (``backend=``; a new collection gets
    this one): each snapshot records them in its manifest, and a search of a collection with
    vectors of another backend (``torch`` and ``onnx`` give the same ones, ``onnx-int8`` not),
    or a write that would mix such backends in one collection, raises ``EmbeddingMismatch``
    (409); ``writer(rebuild=True)`` or ``drop_collection`` then lets it be rebuilt. The service
    keeps one embedder per backend (``retrieval.embedding.embedders``) and uses each
    collection's own.
    ``index_settings`` choose each snapshot's FAISS index by its size; ``keep`` snapshots per
    collection stay on disk (the current one and those before it).
    """

    def __init__(
        self,
        root: Path,
        *,
        embedding_backend: str = "torch",
        embedding_model: str = "",
        index_settings: IndexSettings | None = None,
        keep: int = 3,
    ) -> None:
        super().__init__(Path(root), index_settings or IndexSettings())
        self.embedding_backend = embedding_backend
        self.embedding_model = embedding_model
        self.keep = max(1, keep)
        self._writer_locks: dict[str, threading.Lock] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Create the root if needed, migrate an old-layout data dir, remove the snapshots a
        killed writer left half built, load every collection's current snapshot; idempotent."""
        with self._lock:
            if self._open:
                return
            (self.root / "collections").mkdir(parents=True, exist_ok=True)
            self._open = True
        migrate_legacy_layout(self.root, self.writer)
        for collection in sorted((self.root / "collections").iterdir()):
            if collection.is_dir() and (removed := remove_half_built(collection)):
                log.warning(
                    "collection %s: removed %s, left by a killed build",
                    collection.name,
                    ", ".join(removed),
                )
        self.refresh()

    def close(self) -> None:
        self.stop_watching()
        with self._lock:
            self._open = False
            self._snapshots = {}
            self._broken = {}
            self._pointer_keys = {}

    # -- reads -------------------------------------------------------------------------------

    def embedding_backend_of(self, collection: str) -> str:
        """The backend ``collection`` was embedded with (``torch`` when unrecorded)."""
        snapshot = self._snapshots.get(collection)
        if snapshot is None:
            return LEGACY_BACKEND
        return snapshot.manifest.embedding_backend or LEGACY_BACKEND

    def serves(self, collection: str, backend: str | None = None) -> bool:
        """Whether vectors of ``backend`` (default: this object's) may search (and add to)
        ``collection``: they are the vectors of the backend that built it, or it holds
        nothing."""
        if collection not in self._snapshots:
            return True
        built_with = self.embedding_backend_of(collection)
        return vector_family(built_with) == vector_family(backend or self.embedding_backend)

    def source_hashes(self, collection: str, backend: str) -> dict[str, str]:
        """Each source ``collection`` holds, with the SHA-256 of the bytes its vectors came
        from, when those are ``backend``'s vectors (else none: every source is embedded anew)."""
        snapshot = self._snapshots.get(collection)
        if snapshot is None or not self.serves(collection, backend):
            return {}
        return {source: r.sha256 for source, r in snapshot.manifest.files.items() if r.sha256}

    def sentence_rows(self, collection: str, chunk_id: int) -> np.ndarray | None:
        """The sentence vectors ingest kept for chunk ``chunk_id`` of ``collection``
        (``Snapshot.sentence_rows``), of the backend that built it (``embedding_backend_of``);
        None when the serving snapshot keeps none or does not hold the chunk."""
        snapshot = self._snapshots.get(collection)
        if snapshot is None:
            return None
        return snapshot.sentence_rows(chunk_id)

    def passage_pieces(self, passage: Passage, query: np.ndarray) -> list[ScoredPiece]:
        """``passage``'s text cut into sentences, each scored by its kept vector against the
        unit vector ``query`` (of the collection's backend): what context pruning weighs."""
        rows = self.sentence_rows(passage.collection, passage.id)
        return scored_pieces(passage.text, rows, query)

    def _check_backend(self, collection: str, backend: str | None = None) -> None:
        wanted = backend or self.embedding_backend
        if self.serves(collection, wanted):
            return
        built_with = self.embedding_backend_of(collection)
        rebuild = f"`ragtime ingest PATH --collection {collection} --rebuild`"
        raise EmbeddingMismatch(
            f"collection {collection!r} was embedded with the {built_with!r} embedding backend, "
            f"this search uses {wanted!r}: re-ingest it with this backend "
            f"({rebuild} with RAGTIME_EMBEDDING_BACKEND={wanted})",
            collection=collection,
            built_with=built_with,
            wanted=wanted,
        )

    def sources(self, collection: str) -> list[str]:
        """The sources of ``collection``, sorted; [] for an unknown collection."""
        snapshot = self._snapshots.get(collection)
        return snapshot.sources() if snapshot is not None else []

    def kinds(self, collection: str) -> dict[str, int]:
        """The file types of ``collection`` and their chunk counts."""
        snapshot = self._snapshots.get(collection)
        return dict(snapshot.manifest.kinds) if snapshot is not None else {}

    def get(self, ids: Sequence[int]) -> list[Passage]:
        """The passages with these ids (of any collection), in the order given (unknown ids
        left out), score 0."""
        found: dict[int, Passage] = {}
        for name, snapshot in self._snapshots.items():
            rows = snapshot.rows(ids).items()
            found |= {i: passage_of_row(name, row, names=snapshot.names) for i, row in rows}
        return [found[i] for i in ids if i in found]

    def check_filter(self, collection: str, search_filter: SearchFilter) -> None:
        """``InvalidFilter`` when the filter names a file type ``collection`` does not hold."""
        kinds = self.kinds(collection)
        missing = [k for k in search_filter.kinds if k not in kinds]
        if kinds and missing:
            raise InvalidFilter(
                "kind",
                f"collection {collection!r} holds no {', '.join(map(repr, missing))} files; "
                f"its file types are {sorted(kinds)}",
            )

    def search(
        self,
        collection: str,
        vector: np.ndarray,
        k: int,
        search_filter: SearchFilter | None = None,
        *,
        backend: str | None = None,
    ) -> list[Passage]:
        """The ``k`` (or fewer) passages of ``collection`` nearest ``vector`` (made by the
        embedding ``backend``, default this object's), best first."""
        return self.search_with_info(collection, vector, k, search_filter, backend=backend)[0]

    def search_with_info(
        self,
        collection: str,
        vector: np.ndarray,
        k: int,
        search_filter: SearchFilter | None = None,
        *,
        backend: str | None = None,
    ) -> tuple[list[Passage], SearchInfo]:
        """``search``, and how it ran (``SearchInfo``: snapshot, index, device, method)."""
        query = np.ascontiguousarray(vector, dtype=np.float32)
        if query.ndim == 1:
            query = query.reshape(1, -1)
        if query.ndim != 2 or query.shape[0] != 1:
            raise ValueError(
                f"search takes one vector, shape (dim,) or (1, dim); got {vector.shape}"
            )
        snapshot = self._serving(collection)  # held to the end: a swap does not touch it
        self._check_backend(collection, backend)
        hits, method = snapshot.search(query, k, search_filter)
        wild = next((score for _, score in hits if not abs(score) <= MAX_ABS_SCORE), None)
        if wild is not None:  # unit vectors: a cosine similarity; anything else is damage
            reason = (
                f"a search of snapshot {snapshot.version} scored {wild:.3g}, outside the cosine "
                "range [-1, 1]: its index is damaged; re-ingest the collection"
            )
            with self._lock:
                if self._snapshots.get(collection) is snapshot:
                    self._snapshots = {n: s for n, s in self._snapshots.items() if n != collection}
                    self._mark_broken(collection, reason)
                    with contextlib.suppress(OSError):  # not reloaded until CURRENT changes
                        self._remember_pointer(collection)
            raise BrokenIndex(f"collection {collection!r} cannot be searched: {reason}")
        passages = _passages(collection, snapshot, hits, search_filter, "cosine")
        info = SearchInfo(snapshot.version, snapshot.manifest.index, snapshot.device, method)
        return passages, info

    def keyword_rarity(self, collection: str, text: str) -> float:
        """How distinctive ``text``'s rarest word is in ``collection`` (BM25's IDF over that of
        a word one chunk holds: ``KeywordIndex.rarity``), for hybrid fusion's weight."""
        return self._serving(collection).keyword_rarity(text)

    def keyword_search(
        self,
        collection: str,
        query: str,
        k: int,
        search_filter: SearchFilter | None = None,
    ) -> tuple[list[Passage], KeywordInfo]:
        """The ``k`` (or fewer) passages of ``collection`` that best match ``query``'s words
        (BM25 over title, section and text; only passages holding one of them), best first,
        and how the search ran."""
        snapshot = self._serving(collection)
        hits, method = snapshot.keyword_search(query, k, search_filter)
        passages = _passages(collection, snapshot, hits, search_filter, "bm25")
        return passages, KeywordInfo(snapshot.version, method, snapshot.keyword_source)

    # -- writes ------------------------------------------------------------------------------

    @contextmanager
    def writer(
        self,
        collection: str,
        *,
        rebuild: bool = False,
        embedding_backend: str | None = None,
        embedding_model: str | None = None,
    ) -> Iterator[SnapshotWriter]:
        """Build ``collection``'s next snapshot in the block; publish it when the block ends
        without an error and something changed (else throw it away). ``rebuild`` starts from
        nothing instead of the current snapshot. Holds the collection's lock throughout: one
        writer of a collection at a time, across processes (others wait); searches go on."""
        check_collection_name(collection)
        self._require_open()
        path = collection_dir(self.root, collection)
        with self._writer_lock(collection), collection_lock(path):
            with self._lock:
                self._refresh_one(collection)  # the base is what is published now, by anyone
                base = None if rebuild else self._snapshots.get(collection)
            writer = SnapshotWriter(
                path,
                collection,
                base,
                embedding_backend=embedding_backend or self.embedding_backend,
                embedding_model=self.embedding_model
                if embedding_model is None
                else embedding_model,
                index_settings=self.index_settings,
                keep=self.keep,
            )
            try:
                yield writer
                if not writer.changed:
                    writer.abort()
                    return
                snapshot = writer.publish()
            except BaseException:
                writer.abort()
                raise
            with self._lock:
                self._remember_pointer(collection)
                self._install(collection, snapshot)

    def _writer_lock(self, collection: str) -> threading.Lock:
        """This process's lock on writing ``collection`` (the flock orders processes; threads
        of one process need their own, as an flock is per open file)."""
        with self._lock:
            return self._writer_locks.setdefault(collection, threading.Lock())

    def replace_source(
        self, collection: str, source: str, chunks: Sequence[Chunk], vectors: np.ndarray
    ) -> int:
        """Make ``chunks`` (with their ``vectors``) the whole of ``source`` in ``collection``,
        in a new snapshot. Returns the number of chunks stored. On any error nothing changes."""
        with self.writer(collection) as writer:
            return writer.replace_source(source, chunks, vectors)

    def drop_collection(self, collection: str) -> int:
        """Publish an empty snapshot of ``collection``. Returns the number of chunks removed
        (0 for a collection that holds none)."""
        check_collection_name(collection)
        self._require_open()
        before = self._snapshots.get(collection)
        if before is None and collection not in self._broken:
            return 0
        with self.writer(collection, rebuild=True):
            pass
        return before.count if before is not None else 0


def _passages(
    collection: str,
    snapshot: Snapshot,
    hits: list[tuple[int, float]],
    search_filter: SearchFilter | None,
    score_kind: str,
) -> list[Passage]:
    """The passages of a search's ``(id, score)`` hits, in order, named as the filter's source
    prefix asks (``passage_of_row``), their scores of ``score_kind``."""
    rows = snapshot.rows(i for i, _ in hits)
    prefix = search_filter.source_prefix if search_filter is not None else ""
    return [
        passage_of_row(collection, rows[i], score, snapshot.names, prefix, score_kind)
        for i, score in hits
        if i in rows
    ]
