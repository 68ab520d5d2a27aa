"""Writes a data dir in the store's old layout (before snapshots), as that code wrote it:
``chunks.sqlite3`` (tables ``chunks`` and ``collection_embeddings``) and
``faiss/<collection>.faiss``, an ``IndexIDMap2`` over an ``IndexFlatIP`` keyed by the rowids.
Its schema is copied from ``retrieval/store.py`` at commit 24e2fd2 (``git show
24e2fd2:retrieval/store.py``), for the migration tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import faiss
import numpy as np

OLD_SCHEMA = """
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


def write_legacy_collection(
    root: Path,
    collection: str,
    rows: Sequence[tuple[str, str]],
    vectors: np.ndarray,
    *,
    backend: str | None = "torch",
) -> list[int]:
    """Add ``rows`` ((source, text) pairs) with ``vectors`` to ``collection`` in the old
    layout under ``root``; ``backend=None`` writes no backend record (as the oldest dirs).
    Returns the chunk ids."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "faiss").mkdir(exist_ok=True)
    db = sqlite3.connect(root / "chunks.sqlite3")
    try:
        db.executescript(OLD_SCHEMA)
        ids = [
            db.execute(
                "INSERT INTO chunks (collection, source, title, section, ordinal, text) "
                "VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (collection, source, "Doc", "", ordinal, text),
            ).fetchone()[0]
            for ordinal, (source, text) in enumerate(rows)
        ]
        if backend is not None:
            db.execute(
                "INSERT OR REPLACE INTO collection_embeddings VALUES (?, ?, ?)",
                (collection, backend, "old-model"),
            )
        db.commit()
    finally:
        db.close()
    path = root / "faiss" / f"{collection}.faiss"
    index = faiss.IndexIDMap2(faiss.IndexFlatIP(vectors.shape[1]))
    index.add_with_ids(np.ascontiguousarray(vectors, np.float32), np.asarray(ids, np.int64))
    faiss.write_index(index, str(path))
    return ids
