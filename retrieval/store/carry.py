"""What the next snapshot carries over from its base: the chunk rows of the sources it keeps
(copied by SQL from the base's table, a source renamed on the way), their vectors, and the
sentence vectors of every chunk, kept and new, as the snapshot stores them."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

import numpy as np

from retrieval.store.layout import CHUNK_TABLE_COLUMNS, CHUNKS_DB
from retrieval.store.snapshot import Snapshot


def carry_rows(
    db: sqlite3.Connection,
    base: Snapshot | None,
    dropped: set[str],
    base_rows: Mapping[str, str],
    dim: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """The base's kept rows copied into the new table ``db`` (all but the sources in
    ``dropped``; ``base_rows`` maps the name each carried source goes by now to its name in the
    base); their (ids, vectors)."""
    if base is None or not base.count:
        return np.zeros(0, np.int64), np.zeros((0, dim or 0), np.float32)
    uri = f"{(base.path / CHUNKS_DB).resolve().as_uri()}?mode=ro&immutable=1"
    db.execute("ATTACH DATABASE ? AS base", (uri,))  # outside a transaction
    db.execute("BEGIN")
    db.execute("CREATE TEMP TABLE dropped (source TEXT PRIMARY KEY)")
    db.executemany("INSERT INTO dropped VALUES (?)", [(s,) for s in dropped])
    db.execute("CREATE TEMP TABLE renamed (old TEXT PRIMARY KEY, new TEXT NOT NULL)")
    renamed = [(old, new) for new, old in base_rows.items() if new != old]
    db.executemany("INSERT INTO renamed VALUES (?, ?)", renamed)
    carried = CHUNK_TABLE_COLUMNS.replace(
        "source", "COALESCE((SELECT new FROM renamed WHERE old = source), source)", 1
    )
    if "ocr" not in {row[1] for row in db.execute("PRAGMA base.table_info(chunks)")}:
        carried = carried.replace(", ocr", ", 0")  # a base written before OCR
    db.execute(
        f"INSERT INTO chunks ({CHUNK_TABLE_COLUMNS}) SELECT {carried} FROM base.chunks "
        "WHERE source NOT IN (SELECT source FROM dropped)"
    )
    gone = np.fromiter(
        (
            row[0]
            for row in db.execute(
                "SELECT id FROM base.chunks WHERE source IN (SELECT source FROM dropped)"
            )
        ),
        dtype=np.int64,
    )
    db.execute("COMMIT")
    db.execute("DETACH DATABASE base")
    mask = ~np.isin(base.ids, gone)
    return np.asarray(base.ids[mask]), np.asarray(base.vectors[mask], dtype=np.float32)


def sentence_arrays(
    base: Snapshot | None,
    new: Mapping[str, tuple[np.ndarray, np.ndarray]],
    given: Mapping[str, list[np.ndarray] | None],
    kept_ids: np.ndarray,
    ids: np.ndarray,
    dim: int,
) -> tuple[np.ndarray, np.ndarray] | None:
    """The next snapshot's sentence vectors (float16) and offsets, chunk by chunk in
    ``ids`` order: a kept chunk's (``kept_ids``) from the base, a new one's as ``given`` for its
    source (``new``: each new source's ids and vectors). None unless every chunk has them (a
    base written before they were kept, or a source given without)."""
    rows: dict[int, np.ndarray] = {}
    if len(kept_ids):
        if base is None or base.sentences is None:
            return None
        # Sliced from the base's arrays as stored (float16), not converted and back.
        vectors, offsets = base.sentences
        at = np.searchsorted(base.ids, kept_ids)
        for chunk_id, i in zip(kept_ids, at, strict=True):
            rows[int(chunk_id)] = vectors[int(offsets[i]) : int(offsets[i + 1])]
    for source, (new_ids, _) in new.items():
        sentences = given.get(source)
        if sentences is None:
            return None
        rows.update(zip((int(i) for i in new_ids), sentences, strict=True))
    counts = [len(rows[int(i)]) for i in ids]
    offsets = np.zeros(len(ids) + 1, np.int64)
    offsets[1:] = np.cumsum(counts)
    parts = [rows[int(i)].reshape(-1, dim) for i in ids if len(rows[int(i)])]
    matrix = np.concatenate(parts) if parts else np.zeros((0, dim), np.float32)
    return matrix.astype(np.float16), offsets
