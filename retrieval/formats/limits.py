"""How much one file may make its parser (and ingest) do: ``ParseLimits``, and the checks that
enforce them.

A small upload can stand for a huge document: a zip member that inflates a thousandfold, a
million empty paragraphs, five thousand blank pages, a sheet of a million rows. Each parser
checks the limits while it reads, as early as it can know (a PDF's page count before any text
is extracted, an archive's members before a library inflates them, rows as they stream), so a
hostile file is refused before it costs the damage. Over a limit, ``LimitExceeded`` (HTTP 413)
names the limit, its value and what the file held.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal, TypeVar

from retrieval.errors import LimitExceeded

MiB = 1024 * 1024

#: The name of one of ``ParseLimits``' fields: what ``LimitExceeded.limit`` holds.
LimitName = Literal[
    "max_member_bytes",
    "max_inflated_bytes",
    "max_pages",
    "max_rows",
    "max_paragraphs",
    "max_chunks",
    "max_image_pixels",
]

_UNITS: dict[LimitName, str] = {
    "max_member_bytes": "bytes",
    "max_inflated_bytes": "bytes",
    "max_pages": "pages",
    "max_rows": "rows",
    "max_paragraphs": "paragraphs",
    "max_chunks": "chunks",
    "max_image_pixels": "pixels",
}

T = TypeVar("T")


@dataclass(frozen=True)
class ParseLimits:
    """The most one file may hold, per kind of thing a parser reads."""

    max_member_bytes: int = 64 * MiB
    """Bytes one member of a zip package (DOCX, XLSX) inflates to, e.g. word/document.xml."""

    max_inflated_bytes: int = 256 * MiB
    """Bytes all members of one zip package inflate to together."""

    max_pages: int = 2_000
    """Pages of a PDF."""

    max_rows: int = 100_000
    """Rows of a spreadsheet: of all an XLSX workbook's sheets together, or of a CSV file."""

    max_paragraphs: int = 200_000
    """Text blocks of one document: paragraphs (those in table cells too) and table rows of a
    DOCX, paragraphs of a PDF, blocks of Markdown, reST, plain text, HTML or an e-mail with its
    attachments."""

    max_chunks: int = 20_000
    """Chunks one file makes once parsed (checked by ingest, after chunking): the cost of its
    embedding."""

    max_image_pixels: int = 40_000_000
    """Pixels of an image to OCR (a frame of a TIFF), checked from its header before it is
    decoded: a decompression bomb is refused. An A4 page scanned at 600 dpi holds 35 million.
    A scanned PDF page is rendered at a resolution that keeps within it."""

    def check(
        self, limit: LimitName, count: int, *, what: str = "", at_least: bool = False
    ) -> None:
        """``LimitExceeded`` if ``count`` is over the limit named ``limit``; its message starts
        with ``what`` ("word/document.xml inflates to ") and the count ("at least" it when the
        rest was not read): "5000 pages: more than the limit of 2000 pages (max_pages)"."""
        value: int = getattr(self, limit)
        if count > value:
            unit = _UNITS[limit]
            found = f"{what}{'at least ' if at_least else ''}{count} {unit}"
            raise LimitExceeded(found, limit=limit, value=value, unit=unit)

    def tally(self, limit: LimitName) -> Tally:
        """A running count against the limit named ``limit``, for things read one by one."""
        return Tally(self, limit)


#: The limits a parser keeps to when it is given none.
DEFAULT_LIMITS = ParseLimits()


class Tally:
    """Counts things as a parser reads them (rows of all sheets, blocks of a mail) and raises
    ``LimitExceeded`` as soon as their number passes the limit: never after reading them all."""

    def __init__(self, limits: ParseLimits, limit: LimitName) -> None:
        self._limits = limits
        self._limit: LimitName = limit
        self.count = 0

    def add(self, amount: int = 1) -> None:
        """``amount`` more things read."""
        self.count += amount
        self._limits.check(self._limit, self.count, at_least=True)

    def each(self, items: Iterable[T]) -> Iterator[T]:
        """``items``, counted one by one as they are taken."""
        for item in items:
            self.add()
            yield item
