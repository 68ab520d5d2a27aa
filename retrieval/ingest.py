"""Ingest: read files, chunk them, embed the chunks, make them each file's chunks in the store.

Re-ingesting a file replaces its chunks, so ingest is idempotent. A file that cannot be read,
is not UTF-8, or holds no text is reported with its reason, and the others go on; files with
other suffixes are listed as skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.chunking import SUPPORTED_SUFFIXES, Chunk, chunk_text
from retrieval.embeddings import Embedder
from retrieval.store import DocumentStore


@dataclass
class IngestReport:
    files: int = 0  # files ingested
    chunks: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    skipped: list[str] = field(default_factory=list)  # unsupported suffix


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


def _read_text(file: Path) -> str:
    """The file as text; ``ValueError`` with the reason when it is not UTF-8."""
    data = file.read_bytes()
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
) -> IngestReport:
    """Ingest a file, or every supported file under a directory, into ``collection``.

    Sources are named relative to ``path`` (the file name when ``path`` is a file).
    ``progress`` is called once per ingested file with ``"<source>: <n> chunks"``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    root = path if path.is_dir() else path.parent
    report = IngestReport()
    for file in _walk(path):
        source = file.relative_to(root).as_posix()
        if not _supported(file):
            report.skipped.append(source)
            continue
        try:
            chunks = chunk_text(_read_text(file), source)
        except OSError as exc:
            report.failures.append((source, f"cannot read: {exc.strerror or exc}"))
            continue
        except ValueError as exc:
            report.failures.append((source, str(exc)))
            continue
        if not chunks:
            report.failures.append((source, "no text to index"))
            continue
        vectors = embedder.embed([embedding_input(c) for c in chunks])
        report.chunks += store.replace_source(collection, source, chunks, vectors)
        report.files += 1
        if progress is not None:
            progress(f"{source}: {len(chunks)} chunks")
    return report
