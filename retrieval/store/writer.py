"""Build a collection's next snapshot beside the current one, then publish it atomically.

A ``SnapshotWriter`` starts from the current snapshot (the base) and takes changes: sources
replaced (new chunks and vectors) and sources removed; every other source of the base is
carried over with its stored vectors, never embedded again (``carry``). ``publish()`` then
writes the new snapshot beside the served one, renames it into place, points ``CURRENT`` at it
and prunes the old ones (``publishing``, one function a step): a crash before ``CURRENT``
changes leaves the previous snapshot served and untouched. One writer per collection at a
time: the caller holds ``publishing.collection_lock``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

import numpy as np

from retrieval.embedding.embedder import vector_family
from retrieval.errors import EmbeddingMismatch
from retrieval.ingest.chunking import Chunk
from retrieval.search.bm25 import KeywordIndex
from retrieval.search.index_types import IndexSettings, build_index, choose_spec
from retrieval.store.carry import carry_rows, sentence_arrays
from retrieval.store.layout import (
    CHUNK_TABLE,
    CHUNK_TABLE_COLUMNS,
    CHUNK_TABLE_INDEXES,
    CHUNKS_DB,
    STAGING_PREFIX,
    Manifest,
    SourceRecord,
    published_versions,
    snapshots_dir,
    version_name,
    version_number,
)
from retrieval.store.publishing import point_current, prune, rename_into_place, write_snapshot_files
from retrieval.store.snapshot import Snapshot, keyword_documents


def file_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def kind_of(source: str) -> str:
    """A source's file type from its last suffix (``md`` for ``a/b.md``), "" without one."""
    suffix = PurePosixPath(source).suffix.lower().lstrip(".")
    return "".join(c for c in suffix if c.isalnum())[:16]


class SnapshotWriter:
    """The next snapshot of one collection, under construction. Made by
    ``DocumentStore.writer()``, which holds the collection lock around it."""

    def __init__(
        self,
        collection_path: Path,
        collection: str,
        base: Snapshot | None,
        *,
        embedding_backend: str,
        embedding_model: str,
        index_settings: IndexSettings,
        keep: int,
    ) -> None:
        self.collection_path = collection_path
        self.collection = collection
        self.base = base
        self.embedding_backend = embedding_backend
        self.embedding_model = embedding_model
        self.index_settings = index_settings
        self.keep = keep
        prune(collection_path, keep)  # leftovers of a writer that died
        versions = [version_number(v) or 0 for v in published_versions(collection_path)]
        self.version = version_name(max(versions, default=0) + 1)
        folder = snapshots_dir(collection_path)
        folder.mkdir(parents=True, exist_ok=True)
        self.staging = folder / f"{STAGING_PREFIX}{self.version}-{os.getpid()}"
        self.staging.mkdir()
        self._db = sqlite3.connect(self.staging / CHUNKS_DB, uri=True, isolation_level=None)
        self._db.executescript("PRAGMA synchronous = OFF;" + CHUNK_TABLE)
        self._db.execute("BEGIN")
        self._next_id = base.manifest.next_id if base is not None else 1
        self._files: dict[str, SourceRecord] = dict(base.manifest.files) if base else {}
        self._new: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # source -> (ids, vectors)
        # source -> each chunk's sentence vectors (None: not given, the snapshot keeps none)
        self._sentences: dict[str, list[np.ndarray] | None] = {}
        self._dropped: set[str] = set()  # base sources not carried over
        # the base's sources whose rows are carried, by the name they carry them under (a copy
        # that takes over its original's rows when the original goes: ``remove_source``)
        self._base_rows: dict[str, str] = {s: s for s in self._files}
        self._attached: dict[str, set[str]] = {}  # an e-mail -> its attachments
        self._copies: dict[str, set[str]] = {}  # a source -> its copies
        for source, record in list(self._files.items()):
            self._set(source, record)
        self.rebuild = base is None
        self.published: Snapshot | None = None

    # -- what the base holds -----------------------------------------------------------------

    @property
    def files(self) -> dict[str, SourceRecord]:
        """The sources the next snapshot will hold, as known so far."""
        return dict(self._files)

    @property
    def reuses_vectors(self) -> bool:
        """Whether the base's vectors are of this writer's backend (else every source must be
        embedded again, and a write that would mix them is refused)."""
        base = self.base
        if base is None or not base.count:
            return True
        return vector_family(base.manifest.embedding_backend) == vector_family(
            self.embedding_backend
        )

    @property
    def changed(self) -> bool:
        base = dict(self.base.manifest.files) if self.base is not None else {}
        return self.rebuild or bool(self._new or self._dropped) or self._files != base

    def _dim(self) -> int | None:
        if self._new:
            return next(iter(self._new.values()))[1].shape[1]
        if self.base is not None and self.base.count:
            return int(self.base.vectors.shape[1])
        return None

    def _check_backend(self, source: str) -> None:
        """Refuse to mix vectors of two backends (see ``DocumentStore``)."""
        base = self.base
        if base is None or not base.count:
            return
        built_with = base.manifest.embedding_backend
        if vector_family(built_with) == vector_family(self.embedding_backend):
            return
        others = set(base.manifest.files) - self._dropped - {source}
        if others:
            rebuild = f"`ragtime ingest PATH --collection {self.collection} --rebuild`"
            raise EmbeddingMismatch(
                f"collection {self.collection!r} was embedded with the {built_with!r} embedding "
                f"backend, this ingest uses {self.embedding_backend!r}: rebuild it whole with "
                f"this backend ({rebuild} drops its other sources first), ingest into a new "
                f"collection, or set RAGTIME_EMBEDDING_BACKEND={built_with}",
                collection=self.collection,
                built_with=built_with,
                wanted=self.embedding_backend,
            )

    # -- changes -----------------------------------------------------------------------------

    def replace_source(
        self,
        source: str,
        chunks: Sequence[Chunk],
        vectors: np.ndarray,
        *,
        sha256: str = "",
        root: str = "",
        sentence_vectors: Sequence[np.ndarray] | None = None,
        message: str = "",
    ) -> int:
        """Make ``chunks`` (with ``vectors``, and each chunk's ``sentence_vectors`` when
        given: ``retrieval.store.sentences``) the whole of ``source`` (an attachment of the e-mail
        ``message``, when given); no chunks removes it. Returns the number stored. A
        ``ValueError`` changes nothing."""
        if sentence_vectors is not None and len(sentence_vectors) != len(chunks):
            raise ValueError(
                f"{len(chunks)} chunk(s) but sentence vectors for {len(sentence_vectors)}"
            )
        matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(chunks):
            raise ValueError(
                f"{len(chunks)} chunk(s) but vectors of shape {getattr(vectors, 'shape', '?')}"
            )
        dim = self._dim()
        others = self._new.keys() - {source}
        base_rows = self.base is not None and bool(set(self.base.manifest.files) - self._dropped)
        if len(chunks) and dim is not None and matrix.shape[1] != dim and (others or base_rows):
            raise ValueError(
                f"vectors have {matrix.shape[1]} dimensions, collection {self.collection!r} "
                f"has {dim}: was the embedding model changed?"
            )
        self._check_backend(source)
        self.remove_source(source)
        if not chunks:
            return 0
        ids = np.arange(self._next_id, self._next_id + len(chunks), dtype=np.int64)
        self._next_id += len(chunks)
        self._db.executemany(
            f"INSERT INTO chunks ({CHUNK_TABLE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    int(i),
                    source,
                    c.title,
                    c.section,
                    c.ordinal,
                    c.page,
                    c.kind or kind_of(source),
                    c.text,
                    int(c.ocr),
                )
                for i, c in zip(ids, chunks, strict=True)
            ],
        )
        self._new[source] = (ids, matrix)
        self._sentences[source] = list(sentence_vectors) if sentence_vectors is not None else None
        self._set(source, SourceRecord(sha256, len(chunks), root, message=message))
        return len(chunks)

    def _set(self, source: str, record: SourceRecord) -> None:
        """``record`` is ``source``'s now (indexed by its message and its original)."""
        self._unset(source)
        self._files[source] = record
        if record.message:
            self._attached.setdefault(record.message, set()).add(source)
        if record.duplicate_of:
            self._copies.setdefault(record.duplicate_of, set()).add(source)

    def _unset(self, source: str) -> None:
        record = self._files.pop(source, None)
        if record is not None:
            self._attached.get(record.message, set()).discard(source)
            self._copies.get(record.duplicate_of, set()).discard(source)

    def remove_source(self, source: str) -> None:
        """Leave ``source`` out of the next snapshot (nothing when it holds no such source),
        and an e-mail's attachments with it. A source with copies leaves its chunks to the
        first of them (by name), which the others then copy."""
        for attached in sorted(self._attached.get(source, ())):
            self.remove_source(attached)
        record = self._files.get(source)
        heirs = sorted(self._copies.get(source, ()))
        if record is not None and heirs:
            heir, *others = heirs
            self._move_rows(source, heir)
            self._set(heir, replace(self._files[heir], chunks=record.chunks, duplicate_of=""))
            for other in others:
                self._set(other, replace(self._files[other], duplicate_of=heir))
            self._unset(source)
            return
        if source in self._new:
            self._db.execute("DELETE FROM chunks WHERE source = ?", (source,))
            del self._new[source]
            self._sentences.pop(source, None)
        if source in self._base_rows:
            self._dropped.add(self._base_rows.pop(source))
        self._unset(source)

    def _move_rows(self, source: str, heir: str) -> None:
        """``source``'s chunks become ``heir``'s (which holds none)."""
        if source in self._new:
            self._db.execute("UPDATE chunks SET source = ? WHERE source = ?", (heir, source))
            self._new[heir] = self._new.pop(source)
            self._sentences[heir] = self._sentences.pop(source, None)
        if source in self._base_rows:
            self._base_rows[heir] = self._base_rows.pop(source)

    def record_copy(
        self, source: str, of: str, *, sha256: str, root: str = "", message: str = ""
    ) -> str | None:
        """Record ``source`` (bytes of SHA-256 ``sha256``) as a copy of ``of``, or of the
        source ``of`` copies: it holds no chunks and shares theirs. Returns the source it
        copies, or None when that holds other bytes now (nothing is changed)."""
        original = self._files.get(of)
        if original is not None and original.duplicate_of:
            of, original = original.duplicate_of, self._files.get(original.duplicate_of)
        if original is None or original.sha256 != sha256 or not original.chunks or of == source:
            return None
        self.remove_source(source)
        self._set(source, SourceRecord(sha256, 0, root, duplicate_of=of, message=message))
        return of

    # -- publish -----------------------------------------------------------------------------

    def publish(self) -> Snapshot:
        """Write, rename, point ``CURRENT`` at the new snapshot, prune; returns it loaded."""
        started = time.perf_counter()
        self._db.execute("COMMIT")
        kept_ids, kept_vectors = carry_rows(
            self._db, self.base, self._dropped, self._base_rows, self._dim()
        )
        parts = [(kept_ids, kept_vectors), *self._new.values()]
        dim = self._dim() or 0
        ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
        vectors = (
            np.concatenate([p[1].reshape(-1, dim) for p in parts])
            if dim
            else np.zeros((0, 0), np.float32)
        )
        order = np.argsort(ids, kind="stable")
        sentences = sentence_arrays(
            self.base, self._new, self._sentences, kept_ids, ids[order], dim
        )
        ids, vectors = ids[order], np.ascontiguousarray(vectors[order])
        self._db.executescript(CHUNK_TABLE_INDEXES)
        kinds = dict(self._db.execute("SELECT kind, COUNT(*) FROM chunks GROUP BY kind"))
        keyword = self._keyword_index(len(ids))
        self._db.close()
        spec = choose_spec(len(ids), self.index_settings, dim or 384)
        index = build_index(vectors, ids, spec) if len(ids) else None
        manifest = Manifest(
            collection=self.collection,
            version=self.version,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            embedding_backend=self.embedding_backend,
            embedding_model=self.embedding_model,
            dim=dim,
            chunks=len(ids),
            next_id=self._next_id,
            index=spec,
            build_s=round(time.perf_counter() - started, 3),
            kinds=kinds,
            files=dict(sorted(self._files.items())),
        )
        write_snapshot_files(self.staging, manifest, ids, vectors, index, sentences, keyword)
        final = snapshots_dir(self.collection_path) / self.version
        rename_into_place(self.staging, final)
        point_current(self.collection_path, self.version)
        prune(self.collection_path, self.keep)
        self.published = Snapshot.load(
            final, use_gpu=self.index_settings.use_gpu, verify=False
        )  # verified as written
        return self.published

    def _keyword_index(self, count: int) -> KeywordIndex | None:
        """The BM25 index of every chunk of the next snapshot, in id order (the order of
        ``ids``), from the staged table; None for an empty snapshot."""
        if not count:
            return None
        documents = keyword_documents(self._db)
        if len(documents) != count:
            raise RuntimeError(f"{len(documents)} chunk rows for {count} ids")
        return KeywordIndex.build(documents)

    def abort(self) -> None:
        """Throw the half-built snapshot away; the current one stays."""
        try:
            self._db.close()
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)
