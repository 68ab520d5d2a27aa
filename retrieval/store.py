"""The chunk store: chunk text and metadata in SQLite, one FAISS index per collection.

Layout under ``root``: ``chunks.sqlite3`` (table ``chunks``) and ``faiss/<collection>.faiss``,
each an ``IndexIDMap2`` over an ``IndexFlatIP`` whose ids are the SQLite rowids, so a search
hit maps straight to its row. Vectors are L2-normalised, so inner product is cosine.

``replace_source`` is the only write: it swaps one source's chunks for new ones. The SQLite
change is one transaction, committed only once the new index is written to a temporary file;
the file then replaces the old one atomically. Ids are never reused (AUTOINCREMENT), so an
index left stale by a crash, or by another process ingesting, can miss rows but never point at
the wrong text. One lock serialises writes and SQLite reads; a FAISS search runs outside it (an
installed index is never changed, only replaced whole), and the list of collections is a
snapshot read without it, so neither waits for the other. The object is safe to share.
"""

from __future__ import annotations

import logging
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from retrieval.chunking import Chunk
from retrieval.errors import BrokenIndex, EmbeddingMismatch, RetrievalError, UnknownCollection

log = logging.getLogger(__name__)

_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    collection TEXT NOT NULL,
    source TEXT NOT NULL,
    title TEXT NOT NULL,
    section TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_collection_source ON chunks (collection, source);
CREATE TABLE IF NOT EXISTS collection_embeddings (
    collection TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model TEXT NOT NULL
);
"""
#: What a collection without a record (ingested before backends were recorded) was built with.
LEGACY_BACKEND = "torch"
_COLUMNS = "id, collection, source, title, section, text"


@dataclass(frozen=True)
class Passage:
    """A stored chunk as a search returns it."""

    id: int
    collection: str
    source: str
    title: str
    section: str
    text: str
    score: float  # inner product of normalised vectors: cosine similarity
    rerank_score: float | None = None


def _passage(row: Sequence[Any], score: float = 0.0) -> Passage:
    id_, collection, source, title, section, text = row  # _COLUMNS order
    return Passage(id_, collection, source, title, section, text, score)


#: Backends that give the same vectors: ONNX fp32 matched torch with cosine 1.0000 on 200 demo
#: chunks and the same top-10 for every question (``ragtime bench embed``); int8 does not.
_SAME_VECTORS = {"torch": "fp32", "onnx": "fp32"}


def _vector_family(backend: str) -> str:
    return _SAME_VECTORS.get(backend, backend)


class DocumentStore:
    """Chunks and their vectors, grouped in named collections.

    ``embedding_backend`` (and ``embedding_model``) name the embedder whose vectors this object
    writes and searches with: each write records them for its collection (table
    ``collection_embeddings``), and a search of a collection recorded with a backend of other
    vectors (``torch`` and ``onnx`` give the same ones, ``onnx-int8`` not), or a write that would
    mix such backends in one collection, raises ``EmbeddingMismatch`` (409);
    ``drop_collection`` then lets it be rebuilt. A collection without a record counts as
    ``torch``.
    """

    def __init__(
        self, root: Path, *, embedding_backend: str = "torch", embedding_model: str = ""
    ) -> None:
        self.embedding_backend = embedding_backend
        self.embedding_model = embedding_model
        self._backends: dict[str, str] = {}
        self.root = Path(root)
        self.db_path = self.root / "chunks.sqlite3"
        self.index_dir = self.root / "faiss"
        self._db: sqlite3.Connection | None = None
        self._indexes: dict[str, Any] = {}
        self._counts: dict[str, int] = {}
        """Chunks per collection: replaced whole on every change, read without the lock."""
        self._broken: dict[str, str] = {}
        """Why a collection with chunks has no index loaded (``check``)."""
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------

    def open(self) -> None:
        """Create the directories and table if needed and load every index; idempotent."""
        with self._lock:
            if self._db is not None:
                return
            self.index_dir.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.db_path, check_same_thread=False, isolation_level=None)
            db.executescript(_SCHEMA)
            counts = dict(db.execute("SELECT collection, COUNT(*) FROM chunks GROUP BY 1"))
            for name, count in counts.items():
                path = self._index_path(name)
                if not path.exists():
                    log.warning("collection %r has no index at %s: re-ingest it", name, path)
                    self._broken[name] = f"no index file at {path}"
                    continue
                try:
                    index = faiss.read_index(str(path))
                except Exception as exc:  # a corrupt file costs its collection, not the store
                    log.error("cannot read the index of %r (%s): re-ingest it", name, exc)
                    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    self._broken[name] = f"the index file {path} cannot be read: " + (
                        reason or type(exc).__name__
                    )
                    continue
                if index.ntotal != count:
                    log.warning(
                        "index of %r holds %d vectors for %d chunks: re-ingest it",
                        name,
                        index.ntotal,
                        count,
                    )
                self._indexes[name] = index
            self._backends = dict(
                db.execute("SELECT collection, backend FROM collection_embeddings")
            )
            self._counts = counts
            self._db = db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
            self._db = None
            self._indexes.clear()
            self._counts = {}
            self._broken = {}

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RetrievalError(f"document store at {self.root} is not open")
        return self._db

    def _index_path(self, collection: str) -> Path:
        return self.index_dir / f"{collection}.faiss"

    # -- reads -------------------------------------------------------------------------------

    def collections(self) -> dict[str, int]:
        """Each collection's name and number of chunks (as this object last wrote or read them;
        no lock, no I/O)."""
        self._conn()
        return dict(sorted(self._counts.items()))

    def check(self) -> dict[str, str]:
        """Each collection that holds chunks but cannot be searched, and why (its index file is
        missing or could not be read when loaded); {} when every one can. No I/O."""
        self._conn()
        broken = dict(self._broken)
        return {name: broken[name] for name in sorted(broken) if name in self._counts}

    def has_collection(self, name: str) -> bool:
        """Whether ``name`` holds chunks; no lock, no I/O."""
        self._conn()
        return name in self._counts

    def embedding_backend_of(self, collection: str) -> str:
        """The backend ``collection`` was embedded with (``torch`` when unrecorded)."""
        return self._backends.get(collection, LEGACY_BACKEND)

    def serves(self, collection: str) -> bool:
        """Whether this object's backend may search (and add to) ``collection``: it gives the
        vectors of the backend that built it, or the collection holds nothing."""
        if collection not in self._counts:
            return True
        built_with = self.embedding_backend_of(collection)
        return _vector_family(built_with) == _vector_family(self.embedding_backend)

    def _check_backend(self, collection: str, *, writing: bool = False) -> None:
        if self.serves(collection):
            return
        built_with = self.embedding_backend_of(collection)
        rebuild = f"`ragtime ingest PATH --collection {collection} --rebuild`"
        fix = (
            f"rebuild it whole with this backend ({rebuild} drops its other sources first), "
            f"ingest into a new collection, or set RAGTIME_EMBEDDING_BACKEND={built_with}"
            if writing
            else f"re-ingest it with this backend ({rebuild} with "
            f"RAGTIME_EMBEDDING_BACKEND={self.embedding_backend}), or set "
            f"RAGTIME_EMBEDDING_BACKEND={built_with}"
        )
        raise EmbeddingMismatch(
            f"collection {collection!r} was embedded with the {built_with!r} embedding backend, "
            f"this {'ingest' if writing else 'search'} uses {self.embedding_backend!r}: {fix}",
            collection=collection,
            built_with=built_with,
            wanted=self.embedding_backend,
        )

    def sources(self, collection: str) -> list[str]:
        """The sources of ``collection``, sorted; [] for an unknown collection."""
        with self._lock:
            query = "SELECT DISTINCT source FROM chunks WHERE collection = ? ORDER BY 1"
            return [row[0] for row in self._conn().execute(query, (collection,))]

    def get(self, ids: Sequence[int]) -> list[Passage]:
        """The passages with these ids, in the order given (unknown ids left out), score 0."""
        with self._lock:
            rows = self._rows(ids)
        return [_passage(rows[i]) for i in ids if i in rows]

    def _rows(self, ids: Iterable[int]) -> dict[int, tuple[Any, ...]]:
        wanted = sorted({int(i) for i in ids})
        rows: dict[int, tuple[Any, ...]] = {}
        for start in range(0, len(wanted), 500):  # stay under SQLite's variable limit
            batch = wanted[start : start + 500]
            marks = ",".join("?" * len(batch))
            query = f"SELECT {_COLUMNS} FROM chunks WHERE id IN ({marks})"
            rows.update((row[0], row) for row in self._conn().execute(query, batch))
        return rows

    def search(self, collection: str, vector: np.ndarray, k: int) -> list[Passage]:
        """The ``k`` (or fewer) passages of ``collection`` nearest ``vector``, best first."""
        query = np.ascontiguousarray(vector, dtype=np.float32)
        if query.ndim == 1:
            query = query.reshape(1, -1)
        if query.ndim != 2 or query.shape[0] != 1:
            raise ValueError(
                f"search takes one vector, shape (dim,) or (1, dim); got {vector.shape}"
            )
        with self._lock:
            db = self._conn()
            index = self._indexes.get(collection)
            if index is None:
                known = [row[0] for row in db.execute("SELECT DISTINCT collection FROM chunks")]
                if collection in known:
                    raise BrokenIndex(
                        f"collection {collection!r} cannot be searched: its index could not be "
                        "loaded; re-ingest it"
                    )
                raise UnknownCollection.named(collection, known)
        self._check_backend(collection)
        if query.shape[1] != index.d:
            raise ValueError(f"vector has {query.shape[1]} dimensions, index has {index.d}")
        if k <= 0 or index.ntotal == 0:
            return []
        # Outside the lock: this index object is never changed, only replaced by a new one.
        # One query runs on the calling thread alone (OpenMP's setting is per thread): waking
        # FAISS's OpenMP team costs more than it saves for one query, and under load the team
        # waits for a free core (median 8 ms per search on the loaded bench, 0.02 ms alone).
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            scores, ids = index.search(query, min(k, index.ntotal))
        finally:
            faiss.omp_set_num_threads(threads)
        hits = [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]
        with self._lock:
            rows = self._rows(i for i, _ in hits)
        return [_passage(rows[i], score) for i, score in hits if i in rows]

    # -- the write ---------------------------------------------------------------------------

    def replace_source(
        self, collection: str, source: str, chunks: Sequence[Chunk], vectors: np.ndarray
    ) -> int:
        """Make ``chunks`` (with their ``vectors``) the whole of ``source`` in ``collection``.

        Returns the number of chunks stored. Re-ingesting a source replaces it, never
        duplicates it. On any error nothing changes.
        """
        if not _COLLECTION_NAME.match(collection):
            raise ValueError(
                f"collection name {collection!r} must be 1-64 letters, digits, '_', '.' or '-'"
            )
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(chunks):
            raise ValueError(
                f"{len(chunks)} chunk(s) but vectors of shape {getattr(vectors, 'shape', '?')}"
            )
        with self._lock:
            db = self._conn()
            current = self._indexes.get(collection)
            if current is not None and len(chunks) and matrix.shape[1] != current.d:
                raise ValueError(
                    f"vectors have {matrix.shape[1]} dimensions, collection {collection!r} "
                    f"has {current.d}: was the embedding model changed?"
                )
            if collection in self._counts and self._mixes_backends(db, collection, source):
                self._check_backend(collection, writing=True)
            db.execute("BEGIN IMMEDIATE")
            tmp: Path | None = None
            try:
                old_ids, new_ids = self._replace_rows(db, collection, source, chunks)
                db.execute(
                    "INSERT OR REPLACE INTO collection_embeddings VALUES (?, ?, ?)",
                    (collection, self.embedding_backend, self.embedding_model),
                )
                index = self._updated_index(current, old_ids, new_ids, matrix)
                path = self._index_path(collection)
                tmp = self._write_temp(index, path)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                if tmp is not None:
                    tmp.unlink(missing_ok=True)
                raise
            self._install(collection, index, path, tmp)
            count = db.execute(
                "SELECT COUNT(*) FROM chunks WHERE collection = ?", (collection,)
            ).fetchone()[0]
            if not count:
                db.execute("DELETE FROM collection_embeddings WHERE collection = ?", (collection,))
            backends = {name: b for name, b in self._backends.items() if name != collection}
            self._backends = backends | ({collection: self.embedding_backend} if count else {})
            counts = {name: n for name, n in self._counts.items() if name != collection}
            self._counts = counts | ({collection: count} if count else {})
        return len(chunks)

    def drop_collection(self, collection: str) -> int:
        """Remove ``collection``: its chunks, its index and its backend record. Returns the
        number of chunks removed (0 for a collection that holds none)."""
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                removed = db.execute(
                    "DELETE FROM chunks WHERE collection = ?", (collection,)
                ).rowcount
                db.execute("DELETE FROM collection_embeddings WHERE collection = ?", (collection,))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            self._index_path(collection).unlink(missing_ok=True)
            self._indexes.pop(collection, None)
            self._backends = {n: b for n, b in self._backends.items() if n != collection}
            self._counts = {n: c for n, c in self._counts.items() if n != collection}
        return int(removed)

    def _mixes_backends(self, db: sqlite3.Connection, collection: str, source: str) -> bool:
        """Whether writing ``source`` would leave vectors of two backends in ``collection``."""
        if self.embedding_backend_of(collection) == self.embedding_backend:
            return False
        query = "SELECT 1 FROM chunks WHERE collection = ? AND source != ? LIMIT 1"
        return db.execute(query, (collection, source)).fetchone() is not None

    @staticmethod
    def _replace_rows(
        db: sqlite3.Connection, collection: str, source: str, chunks: Sequence[Chunk]
    ) -> tuple[list[int], list[int]]:
        """Delete the source's rows and insert the new ones: (old ids, new ids)."""
        where = "WHERE collection = ? AND source = ?"
        key = (collection, source)
        old_ids = [row[0] for row in db.execute(f"SELECT id FROM chunks {where}", key)]
        db.execute(f"DELETE FROM chunks {where}", key)
        insert = (
            "INSERT INTO chunks (collection, source, title, section, ordinal, text) "
            "VALUES (?, ?, ?, ?, ?, ?) RETURNING id"
        )
        new_ids = [
            db.execute(insert, (*key, c.title, c.section, c.ordinal, c.text)).fetchone()[0]
            for c in chunks
        ]
        return old_ids, new_ids

    @staticmethod
    def _updated_index(
        current: Any, old_ids: list[int], new_ids: list[int], matrix: np.ndarray
    ) -> Any:
        """A copy of ``current`` (or a new index) without ``old_ids`` and with the new vectors."""
        index: Any
        if current is None:
            index = faiss.IndexIDMap2(faiss.IndexFlatIP(matrix.shape[1]))
        else:
            index = faiss.deserialize_index(faiss.serialize_index(current))
        if old_ids:
            index.remove_ids(np.asarray(old_ids, dtype=np.int64))
        if new_ids:
            index.add_with_ids(matrix, np.asarray(new_ids, dtype=np.int64))
        return index

    @staticmethod
    def _write_temp(index: Any, path: Path) -> Path:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(faiss.serialize_index(index).tobytes())
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp

    def _install(self, collection: str, index: Any, path: Path, tmp: Path) -> None:
        """Put the committed index in place: in memory, then on disk atomically."""
        if index.ntotal == 0:  # the collection is gone
            tmp.unlink(missing_ok=True)
            path.unlink(missing_ok=True)
            self._indexes.pop(collection, None)
            return
        self._indexes[collection] = index
        self._broken.pop(collection, None)
        os.replace(tmp, path)
