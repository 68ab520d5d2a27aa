"""Build a collection's next snapshot beside the current one, then publish it atomically.

A ``SnapshotWriter`` starts from the current snapshot (the base) and takes changes: sources
replaced (new chunks and vectors) and sources removed; every other source of the base is
carried over with its stored vectors, never embedded again. ``publish()`` then:

1. writes the new snapshot into ``snapshots/.building-<version>-<pid>/`` (chunk table, ids,
   vectors, FAISS index, BM25 keyword index, manifest), each file fsynced;
2. renames that directory to ``snapshots/<version>`` (and fsyncs ``snapshots/``);
3. writes ``CURRENT.tmp``, fsyncs it and ``os.replace``s it over ``CURRENT`` (and fsyncs the
   collection directory): the one step that makes the new snapshot the served one;
4. prunes: keeps the current snapshot and the ``keep - 1`` before it.

A crash before step 3 leaves ``CURRENT`` naming the previous snapshot, which is untouched; the
next writer removes the half-built directory. One writer per collection at a time: the caller
holds ``collection_lock`` (an ``flock``, released by the kernel when a writer dies).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import logging
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

import faiss
import numpy as np

from retrieval.errors import EmbeddingMismatch
from retrieval.ingest.chunking import Chunk
from retrieval.search.bm25 import KEYWORD_DIR, KeywordIndex
from retrieval.search.index_types import IndexSettings, build_index, choose_spec
from retrieval.store.snapshot import (
    CHUNKS_DB,
    IDS,
    INDEX,
    LOCK,
    MANIFEST,
    POINTER,
    SENTENCE_OFFSETS,
    SENTENCE_VECTORS,
    STAGING_PREFIX,
    VECTORS,
    Manifest,
    Snapshot,
    SourceRecord,
    file_checksum,
    fsync_dir,
    keyword_documents,
    published_versions,
    read_pointer,
    snapshots_dir,
    verify_checksums,
    version_name,
    version_number,
)

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    title TEXT NOT NULL,
    section TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    page INTEGER,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    ocr INTEGER NOT NULL DEFAULT 0
);
"""
_INDEXES = """
CREATE INDEX IF NOT EXISTS chunks_source ON chunks (source);
CREATE INDEX IF NOT EXISTS chunks_kind ON chunks (kind);
"""
_COLUMNS = "id, source, title, section, ordinal, page, kind, text, ocr"
#: Backends that give the same vectors: ONNX fp32 matched torch with cosine 1.0000 on 200 demo
#: chunks and the same top-10 for every question (``ragtime bench embed``); int8 does not.
_SAME_VECTORS = {"torch": "fp32", "onnx": "fp32"}


def write_faiss_index(index: Any, path: Path) -> None:
    """``faiss.write_index``, whose failures (a RuntimeError naming the C library's error in
    parentheses at its end) are raised as the ``OSError`` they are: a full disk is ENOSPC."""
    try:
        faiss.write_index(index, str(path))
    except RuntimeError as exc:
        found = re.search(r"\(([^()]+)\)\s*$", str(exc))
        reason = found[1] if found else "faiss could not write the index"
        code = next((c for c in errno.errorcode if os.strerror(c) == reason), errno.EIO)
        raise OSError(code, reason, str(path)) from exc


def vector_family(backend: str) -> str:
    return _SAME_VECTORS.get(backend, backend)


def file_sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def kind_of(source: str) -> str:
    """A source's file type from its last suffix (``md`` for ``a/b.md``), "" without one."""
    suffix = PurePosixPath(source).suffix.lower().lstrip(".")
    return "".join(c for c in suffix if c.isalnum())[:16]


@contextmanager
def collection_lock(collection: Path) -> Iterator[None]:
    """Hold the collection's writer lock (blocking until any other writer is done, and saying
    so: an ingest that waits for another does not look hung)."""
    collection.mkdir(parents=True, exist_ok=True)
    with open(collection / LOCK, "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning(
                "collection %s: another writer holds it; waiting for it to finish",
                collection.name,
            )
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def remove_half_built(collection: Path) -> list[str]:
    """Remove the snapshots a killed writer left half built in ``collection``, if no writer
    holds its lock now (a live one's staging directory is its own). Returns the removed names."""
    folder = snapshots_dir(collection)
    if not folder.is_dir():
        return []
    with open(collection / LOCK, "a+b") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return []  # a writer is at work: what it stages is not a leftover
        try:
            return _remove_staging(folder)
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _remove_staging(folder: Path) -> list[str]:
    """Remove the half-built snapshots in a collection's ``snapshots`` folder; their names.
    Call with the collection lock held."""
    removed = []
    if folder.is_dir():
        for path in folder.iterdir():
            if path.name.startswith(STAGING_PREFIX):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path.name)
    return removed


def _fsync_file(path: Path) -> None:
    with open(path, "rb+") as f:
        os.fsync(f.fileno())


# The publish steps, one function each (a crash test stops the process between them).


def write_snapshot_files(
    staging: Path,
    manifest: Manifest,
    ids: np.ndarray,
    vectors: np.ndarray,
    index: Any,
    sentences: tuple[np.ndarray, np.ndarray] | None = None,
    keyword: KeywordIndex | None = None,
) -> Manifest:
    """Step 1: the arrays, indexes (FAISS, and BM25 when given) and manifest (with every
    other file's checksum) beside the chunk table, all fsynced, then read back and checked
    against the checksums; returns the manifest as written."""
    np.save(staging / IDS, ids)
    np.save(staging / VECTORS, vectors)
    if sentences is not None:
        np.save(staging / SENTENCE_VECTORS, sentences[0])
        np.save(staging / SENTENCE_OFFSETS, sentences[1])
    if index is not None:
        write_faiss_index(index, staging / INDEX)
    names = [CHUNKS_DB, IDS, VECTORS]
    names += [INDEX] if index is not None else []
    names += [SENTENCE_VECTORS, SENTENCE_OFFSETS] if sentences is not None else []
    if keyword is not None:
        written = keyword.save(staging / KEYWORD_DIR)
        names += [path.relative_to(staging).as_posix() for path in written]
    for name in names:
        _fsync_file(staging / name)
    if keyword is not None:
        fsync_dir(staging / KEYWORD_DIR)
    manifest = replace(manifest, checksums={name: file_checksum(staging / name) for name in names})
    (staging / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")
    _fsync_file(staging / MANIFEST)
    fsync_dir(staging)
    verify_checksums(staging, manifest)  # what reached the disk, before it is published
    return manifest


def rename_into_place(staging: Path, final: Path) -> None:
    """Step 2: the snapshot gets its final name (still not served)."""
    os.rename(staging, final)
    fsync_dir(final.parent)


def point_current(collection: Path, version: str) -> None:
    """Step 3: ``CURRENT`` names ``version``, replaced atomically."""
    tmp = collection / f".{POINTER}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(version + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, collection / POINTER)
    fsync_dir(collection)


def prune(collection: Path, keep: int) -> list[str]:
    """Step 4: remove all but the current snapshot and the ``keep - 1`` published before it,
    and any half-built one. Returns the removed names. Call with the collection lock held."""
    current = read_pointer(collection)
    folder = snapshots_dir(collection)
    removed = _remove_staging(folder)
    versions = published_versions(collection)
    if current in versions:
        kept = set(versions[: versions.index(current) + 1][-max(1, keep) :])
    else:
        kept = set(versions[-max(1, keep) :])
    for name in versions:
        if name not in kept:
            shutil.rmtree(folder / name, ignore_errors=True)
            removed.append(name)
    return removed


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
        self._db.executescript("PRAGMA synchronous = OFF;" + _SCHEMA)
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
            f"INSERT INTO chunks ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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

    def _carried(self) -> tuple[np.ndarray, np.ndarray]:
        """The base's kept rows copied into the new table; their (ids, vectors)."""
        base = self.base
        if base is None or not base.count:
            return np.zeros(0, np.int64), np.zeros((0, self._dim() or 0), np.float32)
        uri = f"{(base.path / CHUNKS_DB).resolve().as_uri()}?mode=ro&immutable=1"
        self._db.execute("ATTACH DATABASE ? AS base", (uri,))  # outside a transaction
        self._db.execute("BEGIN")
        self._db.execute("CREATE TEMP TABLE dropped (source TEXT PRIMARY KEY)")
        self._db.executemany("INSERT INTO dropped VALUES (?)", [(s,) for s in self._dropped])
        self._db.execute("CREATE TEMP TABLE renamed (old TEXT PRIMARY KEY, new TEXT NOT NULL)")
        renamed = [(old, new) for new, old in self._base_rows.items() if new != old]
        self._db.executemany("INSERT INTO renamed VALUES (?, ?)", renamed)
        carried = _COLUMNS.replace(
            "source", "COALESCE((SELECT new FROM renamed WHERE old = source), source)", 1
        )
        if "ocr" not in {row[1] for row in self._db.execute("PRAGMA base.table_info(chunks)")}:
            carried = carried.replace(", ocr", ", 0")  # a base written before OCR
        self._db.execute(
            f"INSERT INTO chunks ({_COLUMNS}) SELECT {carried} FROM base.chunks "
            "WHERE source NOT IN (SELECT source FROM dropped)"
        )
        gone = np.fromiter(
            (
                row[0]
                for row in self._db.execute(
                    "SELECT id FROM base.chunks WHERE source IN (SELECT source FROM dropped)"
                )
            ),
            dtype=np.int64,
        )
        self._db.execute("COMMIT")
        self._db.execute("DETACH DATABASE base")
        mask = ~np.isin(base.ids, gone)
        return np.asarray(base.ids[mask]), np.asarray(base.vectors[mask], dtype=np.float32)

    def publish(self) -> Snapshot:
        """Write, rename, point ``CURRENT`` at the new snapshot, prune; returns it loaded."""
        started = time.perf_counter()
        self._db.execute("COMMIT")
        kept_ids, kept_vectors = self._carried()
        parts = [(kept_ids, kept_vectors), *self._new.values()]
        dim = self._dim() or 0
        ids = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
        vectors = (
            np.concatenate([p[1].reshape(-1, dim) for p in parts])
            if dim
            else np.zeros((0, 0), np.float32)
        )
        order = np.argsort(ids, kind="stable")
        sentences = self._sentence_arrays(kept_ids, ids[order], dim)
        ids, vectors = ids[order], np.ascontiguousarray(vectors[order])
        self._db.executescript(_INDEXES)
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

    def _sentence_arrays(
        self, kept_ids: np.ndarray, ids: np.ndarray, dim: int
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The next snapshot's sentence vectors (float16) and offsets, chunk by chunk in
        ``ids`` order: a kept chunk's from the base, a new one's as given. None unless every
        chunk has them (a base written before they were kept, or a source given without)."""
        rows: dict[int, np.ndarray] = {}
        base = self.base
        if len(kept_ids):
            if base is None or base.sentences is None:
                return None
            # Sliced from the base's arrays as stored (float16), not converted and back.
            vectors, offsets = base.sentences
            at = np.searchsorted(base.ids, kept_ids)
            for chunk_id, i in zip(kept_ids, at, strict=True):
                rows[int(chunk_id)] = vectors[int(offsets[i]) : int(offsets[i + 1])]
        for source, (new_ids, _) in self._new.items():
            given = self._sentences.get(source)
            if given is None:
                return None
            rows.update(zip((int(i) for i in new_ids), given, strict=True))
        counts = [len(rows[int(i)]) for i in ids]
        offsets = np.zeros(len(ids) + 1, np.int64)
        offsets[1:] = np.cumsum(counts)
        parts = [rows[int(i)].reshape(-1, dim) for i in ids if len(rows[int(i)])]
        matrix = np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
        return matrix.astype(np.float16), offsets

    def abort(self) -> None:
        """Throw the half-built snapshot away; the current one stays."""
        try:
            self._db.close()
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)
