"""Ingest: read files, parse and chunk them, embed the chunks, publish them as the collection's
next snapshot.

Incremental: a file whose content hash (SHA-256) matches the current snapshot's is neither
parsed nor embedded (its chunks and vectors are carried over); a changed or new file replaces
its chunks; a file gone from a folder ingested before removes its chunks (only sources that
were ingested from that same folder, so folders ingested into one collection do not remove
each other's files). All of it lands in one new snapshot, published atomically at the end: a
crash mid-ingest leaves the previous snapshot served.

Each file is read by the parser of its format (``retrieval.formats``); one that cannot be read
or parsed, holds no text, or needs OCR is reported with its reason, keeps its previous chunks,
and the others go on; files of other types are listed as skipped. A chunk whose normalised text
was already taken in this ingest (a licence footer, a repeated notice) is stored once, with its
first source.

Embedding is batched across files: chunks of several files are gathered, sorted by length,
embedded in batches of similar lengths (little padding), and put back in order before each
file's chunks are written; so are the chunks' sentences, whose vectors the snapshot keeps for
attribution (``retrieval.sentences``). ``on_progress`` hears after every written file how far
ingest is: files done of all, chunks per second and the time left.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
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
from retrieval.formats.document import Document
from retrieval.sentences import sentence_vectors
from retrieval.snapshot_writer import SnapshotWriter, file_sha256
from retrieval.store import DocumentStore
from retrieval.tokens import TokenCounter, approximate_tokens, wordpiece_counter

#: Chunks gathered (from one file or several) before they are embedded together.
EMBED_GATHER = 256

__all__ = ["IngestProgress", "IngestReport", "embedding_input", "ingest_path", "iter_documents"]


@dataclass
class IngestReport:
    files: int = 0  # files embedded and stored (added + changed)
    chunks: int = 0  # chunks embedded
    failures: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    skipped: list[str] = field(default_factory=list)  # unsupported suffix
    duplicates: int = 0  # chunks not stored again: their text was already taken
    added: list[str] = field(default_factory=list)  # new sources
    changed: list[str] = field(default_factory=list)  # sources whose content hash changed
    unchanged: list[str] = field(default_factory=list)  # carried over, not embedded again
    removed: list[str] = field(default_factory=list)  # sources gone from the ingested folder
    snapshot: str | None = None  # the version published, None when nothing changed

    def summary(self) -> str:
        return (
            f"{len(self.added)} added, {len(self.changed)} changed, "
            f"{len(self.unchanged)} unchanged, {len(self.removed)} removed"
        )


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
    sha256: str
    root: str  # the folder it was ingested from ("" for a file named alone)
    new: bool  # not in the current snapshot


def ingest_path(
    path: Path,
    *,
    collection: str,
    embedder: Embedder,
    store: DocumentStore,
    progress: Callable[[str], None] | None = None,
    rebuild: bool = False,
    on_progress: Callable[[IngestProgress], None] | None = None,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    count_tokens: TokenCounter | None = None,
) -> IngestReport:
    """Ingest a file, or every supported file under a directory, into ``collection``'s next
    snapshot (``rebuild``: one that starts empty instead of from the current one).

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
    report = IngestReport()
    with store.writer(
        collection,
        rebuild=rebuild,
        embedding_backend=embedder.backend,
        embedding_model=embedder.model_name,
    ) as writer:
        _ingest_into(
            writer,
            path,
            report,
            embedder=embedder,
            chunk=partial(
                chunk_document, max_tokens=chunk_tokens, overlap_tokens=overlap_tokens, count=count
            ),
            progress=progress,
            on_progress=on_progress,
        )
        report.snapshot = writer.version if writer.changed else None
    return report


def _ingest_into(
    writer: SnapshotWriter,
    path: Path,
    report: IngestReport,
    *,
    embedder: Embedder,
    chunk: Callable[[Document, str], list[Chunk]],
    progress: Callable[[str], None] | None,
    on_progress: Callable[[IngestProgress], None] | None,
) -> None:
    root = path if path.is_dir() else path.parent
    root_key = str(root.resolve()) if path.is_dir() else ""
    previous = writer.files
    files = list(_walk(path))
    sizes = {file: _size(file) for file in files}
    started = time.perf_counter()
    seen_sources: set[str] = set()
    seen_texts: set[str] = set()
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
        chunks = [c for item in pending for c in item.chunks]
        vectors = embed_by_length(embedder, [embedding_input(c) for c in chunks], embedded)
        # Each chunk's sentence vectors, kept for attribution (retrieval.sentences).
        said = sentence_vectors(
            lambda texts: embed_by_length(embedder, texts), [c.text for c in chunks]
        )
        start = 0
        for item in pending:
            end = start + len(item.chunks)
            report.chunks += writer.replace_source(
                item.source,
                item.chunks,
                vectors[start:end],
                sha256=item.sha256,
                root=item.root,
                sentence_vectors=said[start:end],
            )
            report.files += 1
            (report.added if item.new else report.changed).append(item.source)
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
        seen_sources.add(source)
        known = previous.get(source)
        chunks: list[Chunk] = []
        try:
            data = file.read_bytes()
            digest = file_sha256(data)
            if known is not None and known.sha256 == digest and writer.reuses_vectors:
                report.unchanged.append(source)
                tick(sizes[file])
                continue
            chunks = chunk(parse_bytes(data, file.name), source)
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
        unique = _first_seen(chunks, seen_texts)
        report.duplicates += len(chunks) - len(unique)
        if not unique:
            report.failures.append((source, "no text to index: every chunk is a duplicate"))
            tick(sizes[file])
            continue
        where = root_key or (known.root if known else "")
        pending.append(_Pending(source, sizes[file], unique, digest, where, known is None))
        if sum(len(item.chunks) for item in pending) >= EMBED_GATHER:
            flush()
    if pending:
        flush()
    if root_key:  # a folder: its files that are gone go too
        for source, record in previous.items():
            if record.root == root_key and source not in seen_sources:
                writer.remove_source(source)
                report.removed.append(source)


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
