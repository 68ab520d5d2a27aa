"""What a search returns: ``Passage`` (a stored chunk with its scores) and ``SearchInfo`` (how
the search ran: the snapshot, its index, where it ran, how a filter applied)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.search.index_types import IndexSpec
from retrieval.search.source_names import SourceNames


@dataclass(frozen=True)
class Passage:
    """A stored chunk as a search returns it."""

    id: int
    collection: str
    source: str
    title: str
    section: str
    text: str
    score: float  # what ``score_kind`` says
    rerank_score: float | None = None
    page: int | None = None  # 1-based page of a paged format, else None
    kind: str = ""  # the file type it came from ("md", "pdf", ...)
    ocr: bool = False  # its text was read by OCR (a scanned page, an image)
    message: str = ""  # for an e-mail's attachment ("thread.eml#report.pdf"): the e-mail
    also: tuple[str, ...] = ()  # the other names of the same file: its byte-identical copies
    found_by: tuple[str, ...] = ()  # the searches that found it ("dense", "keyword"); () unknown
    score_kind: str = ""
    """What ``score`` is: ``cosine`` (dense: the cosine similarity of unit vectors, at most 1),
    ``bm25`` (keyword: BM25 over the words, unbounded) or ``rrf`` (hybrid: reciprocal rank
    fusion, ``weight / (60 + rank)`` summed over the rankings, about 0.016 for a first place
    in one); "" where unknown."""


def passage_of_row(
    collection: str,
    row: Sequence[Any],
    score: float = 0.0,
    names: SourceNames | None = None,
    prefix: str = "",
    score_kind: str = "",
) -> Passage:
    """A snapshot's chunk row (``store.snapshot.CHUNK_COLUMNS``) as a passage; its ``ocr`` column,
    which snapshots written before OCR lack, reads as false where it is missing or NULL.
    ``names`` (the snapshot's) name it: by the first of its source and that source's copies
    that starts with ``prefix`` (a search's filter), the others in ``also``, and its message."""
    id_, source, title, section, text, page, kind = row[:7]  # store.snapshot.CHUNK_COLUMNS order
    ocr = bool(row[7]) if len(row) > 7 else False
    shown, also = names.shown(source, prefix) if names is not None else (source, ())
    message = names.message_of(shown) if names is not None else ""
    return Passage(
        id_,
        collection,
        shown,
        title,
        section,
        text,
        score,
        page=page,
        kind=kind,
        ocr=ocr,
        message=message,
        also=also,
        score_kind=score_kind,
    )


@dataclass(frozen=True)
class SearchInfo:
    """How a search ran: the snapshot version, its index, where it ran, how a filter applied."""

    version: str
    index: IndexSpec
    device: str
    method: str

    def attributes(self) -> dict[str, str | int]:
        return self.index.attributes() | {
            "ragtime.index.snapshot": self.version,
            "ragtime.index.device": self.device,
            "ragtime.search.method": self.method,
        }


@dataclass(frozen=True)
class KeywordInfo:
    """How a keyword search ran: the snapshot version, how a filter applied (``bm25`` or
    ``bm25-filtered``), and where its BM25 index came from (``stored`` in the snapshot, or
    ``built`` in memory for a snapshot written before it was kept)."""

    version: str
    method: str
    index: str

    def attributes(self) -> dict[str, str | int]:
        return {
            "ragtime.keyword.snapshot": self.version,
            "ragtime.keyword.method": self.method,
            "ragtime.keyword.index": self.index,
        }
