"""One collection's published snapshots on disk, and a loaded snapshot that answers searches.

Layout under the store root (``$RAGTIME_DATA_DIR/store``)::

    collections/<name>/CURRENT                the published version's name, one line
    collections/<name>/.lock                  held (flock) by the collection's one writer
    collections/<name>/snapshots/<version>/   an immutable snapshot, ``v000001``, ``v000002``...
        manifest.json    embedding backend and model, index kind and parameters, counts,
                         file types, each source file's SHA-256, chunk count and ingest root
                         (and the source a copy shares chunks with, an attachment's message)
        chunks.sqlite3   table ``chunks`` (id, source, title, section, ordinal, page, kind, text,
                         ocr; a table written before OCR lacks ``ocr``: read as 0)
        ids.npy          int64 (n,): the chunk ids, ascending
        vectors.npy      float32 (n, dim): row i is the vector of chunk ``ids[i]``
        index.faiss      the FAISS index over those vectors, by chunk id
        sentence_vectors.npy   float16 (m, dim): the unit vectors of every chunk's sentences
                         (``retrieval.store.sentences``), chunk after chunk in ``ids`` order
        sentence_offsets.npy   int64 (n + 1,): chunk ``ids[i]``'s sentences are rows
                         ``offsets[i]:offsets[i + 1]`` (both files absent in snapshots
                         written before they were kept: attribution then embeds passages)
        bm25/            the BM25 keyword index over every chunk's title, section and text,
                         in ``ids`` order (bm25s's files; ``retrieval.search.bm25``); a snapshot
                         written before it was kept builds it in memory at its first keyword
                         search
    collections/<name>/snapshots/.building-<version>-<pid>/   a snapshot being written

A snapshot is never changed once its directory has its final name; ``CURRENT`` is replaced
atomically (``publishing``). Chunk ids are never reused within a collection, so an id
names the same text in every snapshot that holds it. This module holds the names of that
layout, the pointer and versions, each snapshot's ``Manifest`` and its checksums; a snapshot
loaded to answer searches is a ``snapshot.Snapshot``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path

from retrieval.errors import BrokenIndex, RetrievalError
from retrieval.search.index_types import IndexSpec

FORMAT = 1
POINTER = "CURRENT"
LOCK = ".lock"
MANIFEST = "manifest.json"
CHUNKS_DB = "chunks.sqlite3"
IDS = "ids.npy"
VECTORS = "vectors.npy"
INDEX = "index.faiss"
SENTENCE_VECTORS = "sentence_vectors.npy"
SENTENCE_OFFSETS = "sentence_offsets.npy"
STAGING_PREFIX = ".building-"
_VERSION = re.compile(r"^v(\d{6,})$")
#: The chunk table of ``chunks.sqlite3``, as a writer creates it, its indexes (made once its
#: rows are in) and its columns in the order rows are written.
CHUNK_TABLE = """
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
CHUNK_TABLE_INDEXES = """
CREATE INDEX IF NOT EXISTS chunks_source ON chunks (source);
CREATE INDEX IF NOT EXISTS chunks_kind ON chunks (kind);
"""
CHUNK_TABLE_COLUMNS = "id, source, title, section, ordinal, page, kind, text, ocr"


def collection_dir(root: Path, name: str) -> Path:
    return root / "collections" / name


def snapshots_dir(collection: Path) -> Path:
    return collection / "snapshots"


def version_name(number: int) -> str:
    return f"v{number:06d}"


def version_number(name: str) -> int | None:
    match = _VERSION.match(name)
    return int(match.group(1)) if match else None


def published_versions(collection: Path) -> list[str]:
    """The snapshot directories with a final name, oldest first."""
    folder = snapshots_dir(collection)
    if not folder.is_dir():
        return []
    names = [p.name for p in folder.iterdir() if version_number(p.name) is not None]
    return sorted(names, key=lambda n: version_number(n) or 0)


def read_pointer(collection: Path) -> str | None:
    """The version ``CURRENT`` names, or None when there is no pointer yet."""
    try:
        text = (collection / POINTER).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    if version_number(text) is None:
        raise RetrievalError(f"{collection / POINTER} holds {text!r}, not a snapshot version")
    return text


@dataclass(frozen=True)
class SourceRecord:
    """What a snapshot knows of one source file: its content hash (empty when unknown, e.g.
    migrated from the old layout), its chunk count, and the directory it was ingested from.
    An e-mail's attachment (``thread.eml#report.pdf``) names its ``message``; a byte-identical
    copy holds no chunks and names the source whose chunks it shares (``duplicate_of``). Both
    are empty in manifests written before they were kept."""

    sha256: str
    chunks: int
    root: str = ""
    duplicate_of: str = ""
    message: str = ""


@dataclass(frozen=True)
class Manifest:
    collection: str
    version: str
    created_at: str
    embedding_backend: str
    embedding_model: str
    dim: int
    chunks: int
    next_id: int
    index: IndexSpec
    build_s: float
    kinds: dict[str, int] = field(default_factory=dict)
    files: dict[str, SourceRecord] = field(default_factory=dict)
    format: int = FORMAT
    checksums: dict[str, str] = field(default_factory=dict)
    """SHA-256 of each file of the snapshot but the manifest, by name; empty in a snapshot
    written before they were kept (then nothing is verified)."""

    def to_json(self) -> str:
        data = asdict(self)
        data["index"] = self.index.to_json()
        for record in data["files"].values():  # written only when set: as before they were kept
            for name in ("duplicate_of", "message"):
                if not record[name]:
                    del record[name]
        return json.dumps(data, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        if data.get("format") != FORMAT:
            raise RetrievalError(f"snapshot format {data.get('format')!r}, expected {FORMAT}")
        data["index"] = IndexSpec.from_json(data["index"])
        data["files"] = {k: SourceRecord(**v) for k, v in data["files"].items()}
        return cls(**data)


def file_checksum(path: Path) -> str:
    """The SHA-256 of the file at ``path``, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_checksums(path: Path, manifest: Manifest) -> None:
    """``BrokenIndex`` naming the first file of the snapshot at ``path`` whose content is not
    what its manifest recorded (flipped bytes, a truncated or swapped file)."""
    for name, expected in sorted(manifest.checksums.items()):
        try:
            actual = file_checksum(path / name)
        except OSError as exc:
            raise BrokenIndex(f"cannot read snapshot {path}: {name}: {exc}") from exc
        if actual != expected:
            raise BrokenIndex(
                f"snapshot {path}: {name} does not match its checksum (SHA-256 {actual[:16]}..., "
                f"the manifest says {expected[:16]}...): the file was changed or damaged "
                "after it was written"
            )


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection to an immutable snapshot database (no locks, no journal)."""
    uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
