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
first source. An e-mail's attachments are sources of their own (``thread.eml#report.pdf``),
replaced and removed with their message; a byte-identical copy of another source is recorded
as its copy (``IngestReport.copies``), searchable under both names (``retrieval.ingest.files``).

Embedding is batched across files: chunks of several files are gathered, sorted by length,
embedded in batches of similar lengths (little padding), and put back in order before each
file's chunks are written; so are the chunks' sentences, whose vectors the snapshot keeps for
attribution (``retrieval.store.sentences``). ``on_progress`` hears after every written file how far
ingest is: files done of all, chunks per second and the time left.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from retrieval.embedding.embedder import Embedder
from retrieval.formats import ParseLimits, suffix_of
from retrieval.ingest.chunking import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_OVERLAP_TOKENS,
    Chunk,
    embedding_input,
)
from retrieval.ingest.files import DocumentReader, FileTaker, Holders, Pending
from retrieval.ingest.tokens import TokenCounter, approximate_tokens, wordpiece_counter
from retrieval.store.document_store import DocumentStore
from retrieval.store.sentences import sentence_vectors
from retrieval.store.writer import SnapshotWriter, file_sha256

#: Chunks gathered (from one file or several) before they are embedded together.
EMBED_GATHER = 256

__all__ = [
    "DocumentReader",
    "IngestProgress",
    "IngestReport",
    "PreparedDocuments",
    "embedding_input",
    "ingest_path",
    "iter_documents",
    "prepare_documents",
    "publish_prepared",
]


@dataclass
class IngestReport:
    files: int = 0  # files embedded and stored (added + changed)
    chunks: int = 0  # chunks embedded
    failures: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    skipped: list[str] = field(default_factory=list)  # unsupported suffix
    duplicates: int = 0  # chunks not stored again: their text was already taken
    copies: list[tuple[str, str]] = field(default_factory=list)  # (copy, the source it copies)
    # e-mail attachments stored, (source, its message); their chunks are counted in ``chunks``
    attachments: list[tuple[str, str]] = field(default_factory=list)
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
class PreparedSource:
    """One file parsed, chunked and embedded, ready to be written into a snapshot."""

    source: str
    chunks: list[Chunk]
    vectors: np.ndarray
    sentence_vectors: list[np.ndarray]
    sha256: str
    root: str
    new: bool
    message: str = ""  # an attachment's e-mail
    copy_of: str = ""  # a copy's original (no chunks of its own)


@dataclass
class PreparedDocuments:
    """Documents prepared for a collection (``prepare_documents``), and what became of each
    one not among ``sources`` (in ``report``: unchanged, failed, duplicates)."""

    sources: list[PreparedSource]
    report: IngestReport
    embedding_backend: str
    embedding_model: str


def _embedded(
    pending: Sequence[Pending],
    embedder: Embedder,
    on_batch: Callable[[int], None] | None = None,
) -> list[PreparedSource]:
    """``pending``'s chunks embedded together (and their sentences, for attribution)."""
    chunks = [c for item in pending for c in item.chunks]
    if chunks:
        vectors = embed_by_length(embedder, [embedding_input(c) for c in chunks], on_batch)
        said = sentence_vectors(
            lambda texts: embed_by_length(embedder, texts), [c.text for c in chunks]
        )
    else:  # copies only
        vectors, said = np.zeros((0, 0), np.float32), []
    prepared = []
    start = 0
    for item in pending:
        end = start + len(item.chunks)
        prepared.append(
            PreparedSource(
                item.source,
                item.chunks,
                vectors[start:end],
                said[start:end],
                item.sha256,
                item.root,
                item.new,
                item.message,
                item.copy_of,
            )
        )
        start = end
    return prepared


def _write(writer: SnapshotWriter, prepared: PreparedSource, report: IngestReport) -> int:
    """Write ``prepared`` into ``writer``'s snapshot; the chunks stored."""
    if prepared.copy_of:
        of = writer.record_copy(
            prepared.source,
            prepared.copy_of,
            sha256=prepared.sha256,
            root=prepared.root,
            message=prepared.message,
        )
        if of is None:  # another upload changed it meanwhile
            reason = f"a copy of {prepared.copy_of}, which has changed since: ingest it again"
            report.failures.append((prepared.source, reason))
        else:
            report.copies.append((prepared.source, of))
        return 0
    if not prepared.chunks:  # a message without text of its own: its attachments follow
        writer.remove_source(prepared.source)
        return 0
    stored = writer.replace_source(
        prepared.source,
        prepared.chunks,
        prepared.vectors,
        sha256=prepared.sha256,
        root=prepared.root,
        sentence_vectors=prepared.sentence_vectors,
        message=prepared.message,
    )
    report.chunks += stored
    if prepared.message:
        report.attachments.append((prepared.source, prepared.message))
    else:
        report.files += 1
        (report.added if prepared.new else report.changed).append(prepared.source)
    return stored


def prepare_documents(
    documents: Sequence[tuple[str, bytes]],
    *,
    known: Mapping[str, str],
    embedder: Embedder,
    reader: DocumentReader,
    on_file: Callable[[str | None], None] | None = None,
) -> PreparedDocuments:
    """Parse, chunk and embed ``documents`` (``(source, bytes)``, each source a file name) for
    a collection whose current snapshot holds the sources ``known`` (source -> SHA-256 of the
    bytes its vectors came from, for this embedder's vectors): unchanged ones are left out.
    Touches no store and holds no lock (``publish_prepared`` writes the result). ``on_file``
    hears each source as its parsing begins, and None when embedding begins. A file over a
    limit raises ``LimitExceeded``, its message naming the file; other failures are reported."""
    embedder.load()
    report = IngestReport()
    taker = FileTaker(reader, report, Holders(known), refuse_over_limits=True)
    pending: list[Pending] = []
    for source, data in documents:
        if on_file is not None:
            on_file(source)
        item = Pending(source, len(data), [], file_sha256(data), "", source not in known)
        pending += taker.take(item, data, source, known.get(source))
    if on_file is not None:
        on_file(None)
    return PreparedDocuments(
        _embedded(pending, embedder) if pending else [],
        report,
        embedder.backend,
        embedder.model_name,
    )


def publish_prepared(
    prepared: PreparedDocuments, store: DocumentStore, collection: str
) -> IngestReport:
    """Write ``prepared`` into ``collection``'s next snapshot and publish it: the one step
    that holds the collection's lock. A source whose bytes the snapshot now holds already
    (another upload published them meanwhile) is counted unchanged."""
    report = prepared.report
    with store.writer(
        collection,
        embedding_backend=prepared.embedding_backend,
        embedding_model=prepared.embedding_model,
    ) as writer:
        files = writer.files if writer.reuses_vectors else {}
        unchanged: set[str] = set()
        for item in prepared.sources:
            if item.message in unchanged:
                continue  # with its message
            known = files.get(item.source)
            if not item.message and known is not None and known.sha256 == item.sha256:
                report.unchanged.append(item.source)
                unchanged.add(item.source)
                continue
            _write(writer, item, report)
        report.snapshot = writer.version if writer.changed else None
    return report


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
    limits: ParseLimits | None = None,
) -> IngestReport:
    """Ingest a file, or every supported file under a directory, into ``collection``'s next
    snapshot (``rebuild``: one that starts empty instead of from the current one). A file over
    one of ``limits`` is reported as a failure, with the limit.

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
    reader = DocumentReader(
        chunk_tokens=chunk_tokens,
        overlap_tokens=overlap_tokens,
        count_tokens=count_tokens or default_token_counter(embedder),
        limits=limits or ParseLimits(),
    )
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
            reader=reader,
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
    reader: DocumentReader,
    progress: Callable[[str], None] | None,
    on_progress: Callable[[IngestProgress], None] | None,
) -> None:
    root = path if path.is_dir() else path.parent
    root_key = str(root.resolve()) if path.is_dir() else ""
    previous = writer.files
    hashes = {s: r.sha256 for s, r in previous.items() if r.sha256 and writer.reuses_vectors}
    taker = FileTaker(reader, report, Holders(hashes))
    files = list(_walk(path))
    sizes = {file: _size(file) for file in files}
    started = time.perf_counter()
    seen_sources: set[str] = set()
    pending: list[Pending] = []
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
        for item, prepared in zip(pending, _embedded(pending, embedder, embedded), strict=True):
            stored = _write(writer, prepared, report)
            if progress is not None:
                copied = f"a copy of {item.copy_of}" if item.copy_of else ""
                progress(f"{item.source}: {copied or f'{stored} chunks'}")
            if not item.message:  # an attachment is counted with its message
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
        try:
            data = file.read_bytes()
        except OSError as exc:
            report.failures.append((source, f"cannot read: {exc.strerror or exc}"))
            tick(sizes[file])
            continue
        where = root_key or (known.root if known else "")
        item = Pending(source, sizes[file], [], file_sha256(data), where, known is None)
        known_sha256 = known.sha256 if known is not None and writer.reuses_vectors else None
        taken = taker.take(item, data, file.name, known_sha256)
        if not taken:
            tick(sizes[file])
            continue
        pending += taken
        if sum(len(item.chunks) for item in pending) >= EMBED_GATHER:
            flush()
    if pending:
        flush()
    if root_key:  # a folder: its files that are gone go too (an e-mail with its attachments)
        gone = {r.message or s for s, r in previous.items() if r.root == root_key}
        for source in sorted(gone - seen_sources):
            writer.remove_source(source)
            report.removed.append(source)


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return 0
