"""Ingest: read files, chunk them, embed the chunks, publish them as the collection's next
snapshot.

Incremental: a file whose content hash (SHA-256) matches the current snapshot's is not read
further nor embedded (its chunks and vectors are carried over); a changed or new file replaces
its chunks; a file gone from a folder ingested before removes its chunks (only sources that
were ingested from that same folder, so folders ingested into one collection do not remove
each other's files). All of it lands in one new snapshot, published atomically at the end:
a crash mid-ingest leaves the previous snapshot served. A file that cannot be read, is not
UTF-8, or holds no text is reported with its reason and keeps its previous chunks; files with
other suffixes are listed as skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.chunking import SUPPORTED_SUFFIXES, Chunk, chunk_text
from retrieval.embeddings import Embedder
from retrieval.snapshot_writer import SnapshotWriter, file_sha256
from retrieval.store import DocumentStore


@dataclass
class IngestReport:
    files: int = 0  # files embedded and stored (added + changed)
    chunks: int = 0  # chunks embedded
    failures: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    skipped: list[str] = field(default_factory=list)  # unsupported suffix
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


def _supported(path: Path) -> bool:
    return path.name.lower().endswith(SUPPORTED_SUFFIXES)


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


def _decode(data: bytes) -> str:
    """The file's bytes as text; ``ValueError`` with the reason when it is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 text: {exc.reason} at byte {exc.start}") from exc


def embedding_input(chunk: Chunk) -> str:
    """What is embedded for a chunk: its text under its title and section."""
    heading = (
        chunk.title if chunk.section in ("", chunk.title) else f"{chunk.title}: {chunk.section}"
    )
    return f"{heading}\n{chunk.text}"


def ingest_path(
    path: Path,
    *,
    collection: str,
    embedder: Embedder,
    store: DocumentStore,
    progress: Callable[[str], None] | None = None,
    rebuild: bool = False,
) -> IngestReport:
    """Ingest a file, or every supported file under a directory, into ``collection``'s next
    snapshot (``rebuild``: one that starts empty instead of from the current one).

    Sources are named relative to ``path`` (the file name when ``path`` is a file).
    ``progress`` is called once per embedded file with ``"<source>: <n> chunks"``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    report = IngestReport()
    with store.writer(collection, rebuild=rebuild) as writer:
        _ingest_into(writer, path, embedder, report, progress)
        report.snapshot = writer.version if writer.changed else None
    return report


def _ingest_into(
    writer: SnapshotWriter,
    path: Path,
    embedder: Embedder,
    report: IngestReport,
    progress: Callable[[str], None] | None,
) -> None:
    root = path if path.is_dir() else path.parent
    root_key = str(root.resolve()) if path.is_dir() else ""
    previous = writer.files
    seen: set[str] = set()
    for file in _walk(path):
        source = file.relative_to(root).as_posix()
        if not _supported(file):
            report.skipped.append(source)
            continue
        seen.add(source)
        try:
            data = file.read_bytes()
        except OSError as exc:
            report.failures.append((source, f"cannot read: {exc.strerror or exc}"))
            continue
        digest = file_sha256(data)
        known = previous.get(source)
        if known is not None and known.sha256 == digest and writer.reuses_vectors:
            report.unchanged.append(source)
            continue
        try:
            chunks = chunk_text(_decode(data), source)
        except ValueError as exc:
            report.failures.append((source, str(exc)))
            continue
        if not chunks:
            report.failures.append((source, "no text to index"))
            continue
        vectors = embedder.embed([embedding_input(c) for c in chunks])
        report.chunks += writer.replace_source(
            source, chunks, vectors, sha256=digest, root=root_key or (known.root if known else "")
        )
        report.files += 1
        (report.changed if known is not None else report.added).append(source)
        if progress is not None:
            progress(f"{source}: {len(chunks)} chunks")
    if root_key:  # a folder: its files that are gone go too
        for source, record in previous.items():
            if record.root == root_key and source not in seen:
                writer.remove_source(source)
                report.removed.append(source)
