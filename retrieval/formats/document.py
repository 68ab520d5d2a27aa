"""What a format parser returns: a document as titled, sectioned, paged blocks of plain text.

A parser reads one file and gives a ``Document``: its ``kind`` (the file type), a ``title``
("" when the file names none: the file stem stands in) and its ``blocks`` in reading order.
Each ``Block`` is a paragraph (or a code block, or a table row) with the ``path`` of headings
above it and, for paged formats, its 1-based ``page``; ``ocr`` when OCR read it off an image.
The chunker packs blocks into chunks and never needs to know the format.

A file may carry others (an e-mail its attachments): ``Attachment`` is one such file, unread.

``SectionPath`` turns headings with levels into paths; ``drop_title`` takes the document's
title off the front of every path when one heading stands above all others.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

#: How a section path is shown in ``Chunk.section``: "Design > Why is Python slow?".
PATH_SEPARATOR = " > "
#: Between the section paths of a chunk that spans several: "A > B | A > C".
SECTIONS_SEPARATOR = " | "


def first_section(section: str) -> str:
    """The section a chunk starts in, of its ``Chunk.section``."""
    return section.split(SECTIONS_SEPARATOR, 1)[0]


@dataclass(frozen=True)
class Block:
    """A paragraph, code block or table row, under its headings."""

    text: str
    path: tuple[str, ...] = ()  # headings above it, outermost first
    page: int | None = None  # 1-based page of a paged format
    code: bool = False  # cut at lines, never at sentences
    ocr: bool = False  # read by OCR from a scanned page or an image (``formats.ocr``)


@dataclass(frozen=True)
class Document:
    """One parsed file."""

    kind: str  # "md", "rst", "txt", "html", "pdf", "docx", "eml", "xlsx", "csv", "png"...
    title: str = ""  # "" = the first heading, else the file stem
    blocks: list[Block] = field(default_factory=list)


@dataclass(frozen=True)
class Attachment:
    """A file that another file carries (an e-mail's attachment), to be read as a document of
    its own: its file name (its suffix says its format) and its bytes."""

    name: str
    data: bytes


class SectionPath:
    """The headings above the current point of a document, kept as a stack by level."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []

    def enter(self, level: int, heading: str) -> None:
        """A heading of ``level`` (smaller is outer) closes the deeper ones and opens itself."""
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, heading))

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(heading for _, heading in self._stack)


def drop_title(document: Document) -> Document:
    """When every headed block sits under one same outermost heading, that heading is the
    document's title: it becomes ``title`` (if none was set) and leaves the paths, except for
    the blocks directly under it, whose path stays the title alone."""
    heads = {block.path[0] for block in document.blocks if block.path}
    if len(heads) != 1:
        first = next((block.path[0] for block in document.blocks if block.path), "")
        return replace(document, title=document.title or first)
    [head] = heads
    blocks = [
        replace(block, path=block.path[1:]) if len(block.path) > 1 else block
        for block in document.blocks
    ]
    return replace(document, title=document.title or head, blocks=blocks)
