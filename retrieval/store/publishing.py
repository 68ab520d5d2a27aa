"""Publishing a collection's next snapshot on disk, one step a function (a crash test stops
the process between them), and the collection's writer lock.

``SnapshotWriter.publish()`` runs the steps in order:

1. ``write_snapshot_files`` writes the new snapshot into
   ``snapshots/.building-<version>-<pid>/`` (chunk table, ids, vectors, FAISS index, BM25
   keyword index, manifest), each file fsynced;
2. ``rename_into_place`` renames that directory to ``snapshots/<version>`` (and fsyncs
   ``snapshots/``);
3. ``point_current`` writes ``CURRENT.tmp``, fsyncs it and ``os.replace``s it over ``CURRENT``
   (and fsyncs the collection directory): the one step that makes the new snapshot the served
   one;
4. ``prune`` keeps the current snapshot and the ``keep - 1`` before it.

A crash before step 3 leaves ``CURRENT`` naming the previous snapshot, which is untouched; the
next writer removes the half-built directory (``remove_half_built``). One writer per collection
at a time: the caller holds ``collection_lock`` (an ``flock``, released by the kernel when a
writer dies).
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from retrieval.search.bm25 import KEYWORD_DIR, KeywordIndex
from retrieval.store.layout import (
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
    file_checksum,
    fsync_dir,
    published_versions,
    read_pointer,
    snapshots_dir,
    verify_checksums,
)

log = logging.getLogger(__name__)


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
