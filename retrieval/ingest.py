"""Ingest: read files, parse and chunk them, embed the chunks, make them each file's chunks in
the store.

Re-ingesting a file replaces its chunks, so ingest is idempotent. Each file is read by the
parser of its format (``retrieval.formats``); one that cannot be read or parsed, holds no text,
or needs OCR is reported with its reason and the others go on; files of other types are listed
as skipped. A chunk whose normalised text was already taken in this ingest (a licence footer,
a repeated notice) is stored once, with its first source.

Embedding is batched across files: chunks of several files are gathered, sorted by length,
embedded in batches of similar lengths (little padding), and put back in order before each
file's chunks are written. ``on_progress`` hears after every written file how far ingest is:
files done of all, chunks per second and the time left.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from retrieval.chunking import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_OVERLAP_TOKENS,
    Chunk,
    chunk_document,
    embedding_input,
)
from retrieval.embeddings import Embedder
from retrieval.errors import UnreadableDocument
from retrieval.formats import parse_bytes, suffix_of
from retrieval.store import DocumentStore
from retrieval.tokens import TokenCounter, approximate_tokens, wordpiece_counter

#: Chunks gathered (from one file or several) before they are embedded together.
EMBED_GATHER = 256

__all__ = ["IngestProgress", "IngestReport", "embedding_input", "ingest_path", "iter_documents"]


@dataclass
class IngestReport:
    files: int = 0  # files ingested
    chunks: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    skipped: list[str] = field(default_factory=list)  # unsupported suffix
    duplicates: int = 0  # chunks not stored again: their text was already taken


@dataclass(frozen=True)
class IngestProgress:
    """How far an ingest is, after one more file."""

    files_done: int  # ingested, failed or skipped
    files_total: int
    chunks: int  # embedded so far
    elapsed_s: float
    bytes_done: int
    bytes_total: int

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def eta_s(self) -> float | None:
        """Seconds left, from the bytes read so far; None until there is a rate."""
        if self.bytes_done <= 0 or self.elapsed_s <= 0:
            return None
        return self.elapsed_s * max(self.bytes_total - self.bytes_done, 0) / self.bytes_done


def _supported(path: Path) -> bool:
    return suffix_of(path.name) is not None


def _walk(path: Path) -> Iterator[Path]:
    """``path`` if it is a file, else every file under it, sorted, hidden ones left out."""
    if not path.is_dir():
        yield path
        return
    found: list[Path] = []
    for folder, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += (Path(folder, name) for name in files if not name.startswith("."))
    yield from sorted(found, key=lambda file: file.relative_to(path).parts)


def iter_documents(path: Path) -> Iterator[Path]:
    """``path`` itself if it is a file, or every supported file under it (sorted, not hidden)."""
    path = Path(path)
    if not path.is_dir():
        yield path
        return
    yield from (file for file in _walk(path) if _supported(file))


def _normalised(text: str) -> str:
    return " ".join(text.casefold().split())


def embed_by_length(
    embedder: Embedder,
    texts: Sequence[str],
    on_batch: Callable[[int], None] | None = None,
) -> np.ndarray:
    """``embedder.embed(texts)``, in batches of similar lengths, rows in ``texts``' order;
    ``on_batch`` hears the size of each batch once it is embedded."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors: np.ndarray | None = None
    step = max(embedder.batch_size, 1)
    for start in range(0, len(order), step):
        batch = order[start : start + step]
        part = embedder.embed([texts[i] for i in batch])
        if vectors is None:
            vectors = np.empty((len(texts), part.shape[1]), dtype=np.float32)
        vectors[batch] = part
        if on_batch is not None:
            on_batch(len(batch))
    if vectors is None:
        return embedder.embed([])
    return vectors


def default_token_counter(embedder: Embedder) -> TokenCounter:
    """The embedding model's own tokenizer when its directory has one, else the approximation."""
    model_dir = Path(embedder.model_name)
    if (model_dir / "tokenizer.json").is_file():
        return wordpiece_counter(model_dir)
    return approximate_tokens


@dataclass
class _Pending:
    source: str
    size: int  # bytes
    chunks: list[Chunk]


def ingest_path(
    path: Path,
    *,
    collection: str,
    embedder: Embedder,
    store: DocumentStore,
    progress: Callable[[str], None] | None = None,
    on_progress: Callable[[IngestProgress], None] | None = None,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    count_tokens: TokenCounter | None = None,
) -> IngestReport:
    """Ingest a file, or every supported file under a directory, into ``collection``.

    Sources are named relative to ``path`` (the file name when ``path`` is a file).
    ``progress`` is called once per ingested file with ``"<source>: <n> chunks"``;
    ``on_progress`` with an ``IngestProgress`` once per file handled (ingested, failed or
    skipped) and once per embedded batch. Chunks hold at most ``chunk_tokens`` tokens counted by
    ``count_tokens`` (default: the embedding model's tokenizer), and consecutive chunks of a
    section share ``overlap_tokens``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if not 0 <= overlap_tokens < chunk_tokens:
        raise ValueError(
            f"overlap_tokens must be in [0, chunk_tokens={chunk_tokens}), got {overlap_tokens}"
        )
    count = count_tokens or default_token_counter(embedder)
    root = path if path.is_dir() else path.parent
    files = list(_walk(path))
    sizes = {file: _size(file) for file in files}
    report = IngestReport()
    started = time.perf_counter()
    seen: set[str] = set()
    pending: list[_Pending] = []
    done = {"files": 0, "bytes": 0, "chunks": 0}

    def tell() -> None:
        if on_progress is not None:
            on_progress(
                IngestProgress(
                    files_done=done["files"],
                    files_total=len(files),
                    chunks=done["chunks"],
                    elapsed_s=time.perf_counter() - started,
                    bytes_done=done["bytes"],
                    bytes_total=sum(sizes.values()),
                )
            )

    def tick(size: int) -> None:
        done["files"] += 1
        done["bytes"] += size
        tell()

    def embedded(n: int) -> None:
        done["chunks"] += n
        tell()

    def flush() -> None:
        chunks = [chunk for item in pending for chunk in item.chunks]
        vectors = embed_by_length(embedder, [embedding_input(c) for c in chunks], embedded)
        start = 0
        for item in pending:
            end = start + len(item.chunks)
            report.chunks += store.replace_source(
                collection, item.source, item.chunks, vectors[start:end]
            )
            report.files += 1
            start = end
            if progress is not None:
                progress(f"{item.source}: {len(item.chunks)} chunks")
            tick(item.size)
        pending.clear()

    for file in files:
        source = file.relative_to(root).as_posix()
        if not _supported(file):
            report.skipped.append(source)
            tick(sizes[file])
            continue
        try:
            document = parse_bytes(file.read_bytes(), file.name)
            chunks = chunk_document(
                document,
                source,
                max_tokens=chunk_tokens,
                overlap_tokens=overlap_tokens,
                count=count,
            )
        except OSError as exc:
            reason = f"cannot read: {exc.strerror or exc}"
        except UnreadableDocument as exc:
            reason = str(exc)
        else:
            reason = "no text to index" if not chunks else ""
        if reason:
            report.failures.append((source, reason))
            tick(sizes[file])
            continue
        unique = _first_seen(chunks, seen)
        report.duplicates += len(chunks) - len(unique)
        if not unique:
            report.failures.append((source, "no text to index: every chunk is a duplicate"))
            tick(sizes[file])
            continue
        pending.append(_Pending(source, sizes[file], unique))
        if sum(len(item.chunks) for item in pending) >= EMBED_GATHER:
            flush()
    if pending:
        flush()
    return report


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return 0


def _first_seen(chunks: list[Chunk], seen: set[str]) -> list[Chunk]:
    """The chunks whose normalised text is not in ``seen`` (which takes them), renumbered."""
    unique: list[Chunk] = []
    for chunk in chunks:
        key = _normalised(chunk.text)
        if key in seen:
            continue
        seen.add(key)
        unique.append(replace(chunk, ordinal=len(unique)))
    return unique
