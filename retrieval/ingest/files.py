"""How ingest takes one file: unchanged, a copy of another, or read into its chunks and those of
the files it carries.

``DocumentReader`` parses a file's bytes and chunks them, within ``ParseLimits``. ``FileTaker``
decides what becomes of each file (``take``), in order:

- **unchanged**: its SHA-256 is the one the snapshot holds for it; nothing is read.
- **a copy**: its bytes are those of another source of the same type, in the snapshot or taken
  earlier in this ingest (``Holders``): it is written as a copy of that source
  (``SnapshotWriter.record_copy``), with no chunks of its own, and is no failure.
- **read**: its chunks, a chunk whose normalised text was already taken in this ingest left out
  (stored once, with its first source), and then each file it carries (an e-mail's attachment
  of a type ingest reads) as a source of its own, ``thread.eml#report.pdf``, taken the same way
  (unchanged aside: the message's hash covers them) and read within the same limits as a file.
  An attachment that cannot be read (an image without text) is the attachment's failure, not
  the message's; the chunks of the message and its attachments together count against
  ``max_chunks``. A file of which nothing can be stored is a failure and keeps what the
  snapshot held of it; otherwise it is written whole, attachments and all (``Pending`` items,
  the file first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from retrieval.errors import LimitExceeded, UnreadableDocument
from retrieval.formats import (
    CARRIERS,
    Attachment,
    Document,
    ParseLimits,
    parse_bytes,
    parse_with_attachments,
    suffix_of,
)
from retrieval.ingest.chunking import (
    DEFAULT_CHUNK_TOKENS,
    DEFAULT_OVERLAP_TOKENS,
    Chunk,
    chunk_document,
)
from retrieval.ingest.tokens import TokenCounter
from retrieval.store.writer import file_sha256

#: Between an e-mail's source and its attachment's name: ``thread.eml#report.pdf``.
ATTACHMENT_MARK = "#"


@dataclass(frozen=True)
class DocumentReader:
    """How ingest turns one file's bytes into chunks: parsed within ``limits`` (a file over
    one raises ``LimitExceeded``, ``max_chunks`` included), chunked to ``chunk_tokens`` tokens
    counted by ``count_tokens``, consecutive chunks of a section sharing ``overlap_tokens``."""

    count_tokens: TokenCounter
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS
    limits: ParseLimits = field(default_factory=ParseLimits)

    def __post_init__(self) -> None:
        if not 0 <= self.overlap_tokens < self.chunk_tokens:
            raise ValueError(
                f"overlap_tokens must be in [0, chunk_tokens={self.chunk_tokens}), "
                f"got {self.overlap_tokens}"
            )

    def chunks(self, data: bytes, name: str, source: str) -> list[Chunk]:
        """The chunks of file ``name``'s bytes, stored as ``source``."""
        return self._chunked(parse_bytes(data, name, self.limits), source)

    def parts(self, data: bytes, name: str, source: str) -> tuple[list[Chunk], list[Attachment]]:
        """``chunks``, and the files that file ``name`` carries, unread."""
        document, attachments = parse_with_attachments(data, name, self.limits)
        return self._chunked(document, source), attachments

    def _chunked(self, document: Document, source: str) -> list[Chunk]:
        chunks = chunk_document(
            document,
            source,
            max_tokens=self.chunk_tokens,
            overlap_tokens=self.overlap_tokens,
            count=self.count_tokens,
        )
        self.limits.check("max_chunks", len(chunks))
        return chunks


class Outcomes(Protocol):
    """Where ``FileTaker`` records what became of the files it did not take (an
    ``ingest.IngestReport``)."""

    unchanged: list[str]  # sources whose bytes the snapshot holds already
    failures: list[tuple[str, str]]  # (source, reason)
    duplicates: int  # chunks left out: their text was already taken


@dataclass
class Pending:
    """A source taken, to be embedded and written: a file, or an attachment of one."""

    source: str
    size: int  # bytes (an attachment's are counted in its message's)
    chunks: list[Chunk]
    sha256: str
    root: str  # the folder it was ingested from ("" for a file named alone)
    new: bool  # not in the current snapshot
    message: str = ""  # an attachment's: the source of the e-mail that carries it
    copy_of: str = ""  # a byte-identical copy's: the source whose chunks it shares


class Holders:
    """Which source holds each content (SHA-256) in the snapshot being built: those of the
    current snapshot, as this ingest changes them (``hold``)."""

    def __init__(self, known: Mapping[str, str]) -> None:
        self._sha: dict[str, str] = dict(known)  # source -> SHA-256
        self._by_sha: dict[str, list[str]] = {}
        for source, sha in sorted(known.items()):
            self._by_sha.setdefault(sha, []).append(source)

    def hold(self, source: str, sha256: str) -> None:
        """``source`` now holds the bytes of SHA-256 ``sha256``."""
        self._sha[source] = sha256
        self._by_sha.setdefault(sha256, []).append(source)

    def original_of(self, source: str, sha256: str) -> str | None:
        """Another source of ``source``'s type that holds the bytes of ``sha256``, or None."""
        suffix = suffix_of(source)
        for holder in self._by_sha.get(sha256, ()):
            if holder != source and self._sha.get(holder) == sha256 and suffix_of(holder) == suffix:
                return holder
        return None


def _normalised(text: str) -> str:
    return " ".join(text.casefold().split())


def first_seen(chunks: list[Chunk], seen: set[str]) -> list[Chunk]:
    """The chunks whose normalised text is not in ``seen`` (which takes them), renumbered."""
    unique: list[Chunk] = []
    for chunk in chunks:
        key = _normalised(chunk.text)
        if key in seen:
            continue
        seen.add(key)
        unique.append(replace(chunk, ordinal=len(unique)))
    return unique


@dataclass
class FileTaker:
    """Takes the files of one ingest, one by one (``take``), recording in ``report`` what
    cannot be ingested; ``refuse_over_limits``: a file over a limit raises ``LimitExceeded``
    naming it (or its attachment) instead."""

    reader: DocumentReader
    report: Outcomes
    holders: Holders
    refuse_over_limits: bool = False
    seen_texts: set[str] = field(default_factory=set)

    def take(
        self, item: Pending, data: bytes, name: str, known_sha256: str | None
    ) -> list[Pending]:
        """What to write for ``item``, a file whose ``data`` was read (named ``name``): [] when
        it is unchanged (its hash is ``known_sha256``) or nothing of it can be stored (the
        report says why), else the file (its chunks, or what it copies) and its attachments."""
        if known_sha256 == item.sha256:
            self.report.unchanged.append(item.source)
            return []
        item.copy_of = self.holders.original_of(item.source, item.sha256) or ""
        if item.copy_of and suffix_of(name) not in CARRIERS:
            return [item]
        try:
            chunks, attachments = self.reader.parts(data, name, item.source)
        except (LimitExceeded, UnreadableDocument) as exc:
            self._failed(item.source, exc)
            return []
        if not item.copy_of:  # a copy's attachments are taken, as copies of the original's
            item.chunks = self._unique(item.source, chunks)
        items = [item, *self._attachments(item, attachments)]
        try:
            self.reader.limits.check("max_chunks", sum(len(i.chunks) for i in items))
        except LimitExceeded as exc:
            self._failed(item.source, exc)
            return []
        if not any(i.chunks or i.copy_of for i in items):
            return []  # nothing to store: the snapshot keeps what it held of the file
        for taken in items:
            if taken.chunks:
                self.holders.hold(taken.source, taken.sha256)
        return items

    def _attachments(self, message: Pending, attachments: list[Attachment]) -> list[Pending]:
        """The attachments of ``message`` that can be stored: read, or copies."""
        items: list[Pending] = []
        read: dict[str, str] = {}  # SHA-256 -> the attachment of this message that holds it
        for attachment in attachments:
            source = f"{message.source}{ATTACHMENT_MARK}{attachment.name}"
            sha = file_sha256(attachment.data)
            item = Pending(source, 0, [], sha, message.root, message.new, message=message.source)
            item.copy_of = self.holders.original_of(source, sha) or read.get(sha, "")
            if not item.copy_of:
                try:
                    chunks = self.reader.chunks(attachment.data, attachment.name, source)
                except (LimitExceeded, UnreadableDocument) as exc:
                    self._failed(source, exc)
                    continue
                item.chunks = self._unique(source, chunks)
                if not item.chunks:
                    continue
                read[sha] = source
            items.append(item)
        return items

    def _unique(self, source: str, chunks: list[Chunk]) -> list[Chunk]:
        """``chunks`` less those already taken; none is a failure, which says why."""
        if not chunks:
            self.report.failures.append((source, "no text to index"))
            return []
        unique = first_seen(chunks, self.seen_texts)
        self.report.duplicates += len(chunks) - len(unique)
        if not unique:
            self.report.failures.append((source, "no text to index: every chunk is a duplicate"))
        return unique

    def _failed(self, source: str, exc: UnreadableDocument) -> None:
        if isinstance(exc, LimitExceeded) and self.refuse_over_limits:
            raise exc.of(source) from exc
        self.report.failures.append((source, str(exc)))
