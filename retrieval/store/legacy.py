"""Migrate a data dir of the old store layout into snapshots.

The old layout kept every collection in one ``chunks.sqlite3`` (table ``chunks``, backends in
``collection_embeddings``) and one ``faiss/<collection>.faiss`` (an ``IndexIDMap2`` over an
``IndexFlatIP``). Each collection becomes its first snapshot: the same chunks, their vectors
read back from the index (exact: a flat index stores them whole), the backend it was recorded
with (``torch`` when unrecorded). File hashes are unknown, so the next ingest of a folder
embeds each file once more. The old files then move to ``legacy-backup/`` beside the
snapshots; nothing is deleted. A collection whose old index is missing or unreadable is left
out with an error in the log saying to re-ingest it.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from retrieval.ingest.chunking import Chunk
from retrieval.store.layout import POINTER, collection_dir
from retrieval.store.writer import SnapshotWriter

#: How a collection's next snapshot is written: ``DocumentStore.writer``.
Writer = Callable[..., AbstractContextManager[SnapshotWriter]]

log = logging.getLogger(__name__)

LEGACY_DB = "chunks.sqlite3"
LEGACY_INDEX_DIR = "faiss"
BACKUP_DIR = "legacy-backup"


def has_legacy_layout(root: Path) -> bool:
    return (root / LEGACY_DB).is_file()


def _legacy_vectors(path: Path) -> dict[int, np.ndarray]:
    """Chunk id -> vector, read from an old ``IndexIDMap2`` over a flat index."""
    index: Any = faiss.read_index(str(path))
    ids = faiss.vector_to_array(index.id_map)
    inner = faiss.downcast_index(index.index)
    vectors = inner.reconstruct_n(0, inner.ntotal)
    return {int(i): vectors[row] for row, i in enumerate(ids)}


def _migrate_collection(root: Path, writer: Writer, db: sqlite3.Connection, name: str) -> bool:
    index_path = root / LEGACY_INDEX_DIR / f"{name}.faiss"
    try:
        vectors = _legacy_vectors(index_path)
    except Exception as exc:  # missing or corrupt: the other collections still migrate
        log.error("cannot migrate collection %r: its old index %s: %s", name, index_path, exc)
        return False
    record = db.execute(
        "SELECT backend, model FROM collection_embeddings WHERE collection = ?", (name,)
    ).fetchone()
    backend, model = record if record else ("torch", "")
    rows = db.execute(
        "SELECT id, source, title, section, ordinal, text FROM chunks "
        "WHERE collection = ? ORDER BY source, ordinal",
        (name,),
    ).fetchall()
    by_source: dict[str, list[tuple[int, Chunk]]] = {}
    for id_, source, title, section, ordinal, text in rows:
        by_source.setdefault(source, []).append((id_, Chunk(source, title, section, ordinal, text)))
    with writer(name, rebuild=True, embedding_backend=backend, embedding_model=model) as snapshot:
        for source, items in by_source.items():
            present = [(i, c) for i, c in items if i in vectors]
            if len(present) < len(items):
                log.warning(
                    "%r: %d chunk(s) of %s had no vector in the old index and are left out",
                    name,
                    len(items) - len(present),
                    source,
                )
            if present:
                matrix = np.stack([vectors[i] for i, _ in present])
                snapshot.replace_source(source, [c for _, c in present], matrix)
    log.warning("migrated collection %r (%d chunks) to a snapshot", name, len(rows))
    return True


def migrate_legacy_layout(root: Path, writer: Writer) -> list[str]:
    """Migrate the old-layout collections of the store at ``root`` that have no snapshot yet,
    each through ``writer`` (the store's); move the old files to ``legacy-backup/`` when all
    did. Returns the names migrated."""
    if not has_legacy_layout(root):
        return []
    migrated: list[str] = []
    failed = False
    db = sqlite3.connect(root / LEGACY_DB)
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        if "collection_embeddings" not in tables:
            db.execute("CREATE TEMP TABLE collection_embeddings (collection, backend, model)")
        query = "SELECT DISTINCT collection FROM chunks ORDER BY 1"
        names = [row[0] for row in db.execute(query)] if "chunks" in tables else []
        for name in names:
            if (collection_dir(root, name) / POINTER).exists():
                continue  # already a snapshot (another process migrated it, or ingested)
            if _migrate_collection(root, writer, db, name):
                migrated.append(name)
            else:
                failed = True
    finally:
        db.close()
    if not failed:
        backup = root / BACKUP_DIR
        backup.mkdir(exist_ok=True)
        for name in (LEGACY_DB, f"{LEGACY_DB}-wal", f"{LEGACY_DB}-shm", LEGACY_INDEX_DIR):
            with contextlib.suppress(FileNotFoundError):
                (root / name).rename(backup / name)
        log.warning("the old store files are in %s; delete them when you are satisfied", backup)
    return migrated
