"""What a search returns: ``Passage`` (a stored chunk with its scores) and ``SearchInfo`` (how
the search ran: the snapshot, its index, where it ran, how a filter applied)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval.index_types import IndexSpec


@dataclass(frozen=True)
class Passage:
    """A stored chunk as a search returns it."""

    id: int
    collection: str
    source: str
    title: str
    section: str
    text: str
    score: float  # inner product of normalised vectors: cosine similarity
    rerank_score: float | None = None
    page: int | None = None  # 1-based page of a paged format, else None
    kind: str = ""  # the file type it came from ("md", "pdf", ...)


def passage_of_row(collection: str, row: Sequence[Any], score: float = 0.0) -> Passage:
    """A snapshot's chunk row (``snapshots.CHUNK_COLUMNS``) as a passage."""
    id_, source, title, section, text, page, kind = row  # snapshots.CHUNK_COLUMNS order
    return Passage(id_, collection, source, title, section, text, score, page=page, kind=kind)


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
