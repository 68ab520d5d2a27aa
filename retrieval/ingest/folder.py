"""Ingest a file or a folder from disk: read its files, parse and chunk them, embed the chunks,
publish them as the collection's next snapshot.

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
as its copy (``IngestReport.copies``), searchable under both names (``files``).

Embedding is batched across files: chunks of several files are gathered (``EMBED_GATHER``),
sorted by length, embedded in batches of similar lengths (little padding), and put back in
order before each file's chunks are written; so are the chunks' sentences, whose vectors the
snapshot keeps for attribution (``prepared``). ``on_progress`` hears after every written file
how far ingest is: files done of all, chunks per second and the time left (``report``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from retrieval.embedding.embedder import Embedder
from retrieval.errors import NothingToIngest
from retrieval.formats import SUPPORTED_SUFFIXES, ParseLimits, suffix_of
from retrieval.ingest.chunking import DEFAULT_CHUNK_TOKENS, DEFAULT_OVERLAP_TOKENS
from retrieval.ingest.files import DocumentReader, FileTaker, Holders, Pending
from retrieval.ingest.prepared import default_token_counter, embed_pending, write_prepared
from retrieval.ingest.report import IngestProgress, IngestReport
from retrieval.ingest.tokens import TokenCounter
from retrieval.store.document_store import DocumentStore
from retrieval.store.writer import SnapshotWriter, file_sha256

#: Chunks gathered (from one file or several) before they are embedded together.
EMBED_GATHER = 256


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


def require_documents(path: Path) -> None:
    """Raise ``NothingToIngest`` unless ``path`` is a file of a format ingest reads, or a folder
    holding one (hidden files left out); ``FileNotFoundError`` when it does not exist."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    formats = ", ".join(sorted(SUPPORTED_SUFFIXES))
    if not path.is_dir():
        if not _supported(path):
            raise NothingToIngest(f"{path} is not of a format ingest reads ({formats})")
        return
    files = list(_walk(path))
    if not files:
        raise NothingToIngest(f"{path} holds no files: nothing to ingest")
    if not any(_supported(file) for file in files):
        raise NothingToIngest(
            f"{path} holds {len(files)} file(s), none of a format ingest reads ({formats})"
        )


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
    section share ``overlap_tokens``. A path with nothing to ingest (``require_documents``)
    raises before anything is written: no collection, no snapshot.
    """
    path = Path(path)
    require_documents(path)
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
        for item, prepared in zip(pending, embed_pending(pending, embedder, embedded), strict=True):
            stored = write_prepared(writer, prepared, report)
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
