"""Markdown, reStructuredText (``.rst``, ``.rst.txt``) and plain text, read by ``markup_text``.

Heading levels follow each format's rule: in reStructuredText a style (underline character,
with or without overline) gets the next level the first time it appears; in Markdown ``#``
headings have their own level, a ``===`` underline is level 1 and ``---`` level 2.

Reading is linear in the text, which the upload size bounds: the blocks are counted against
``max_paragraphs`` once read.
"""

from __future__ import annotations

from retrieval.errors import UnreadableDocument
from retrieval.formats.document import Block, Document, SectionPath, drop_title
from retrieval.formats.limits import DEFAULT_LIMITS, ParseLimits
from retrieval.formats.markup_text import iter_blocks, split_sections, strip_noise

_MARKDOWN_UNDERLINES: dict[str | int, int] = {"=": 1, "-": 2}


def decode_text(data: bytes) -> str:
    """UTF-8 (a BOM allowed); ``UnreadableDocument`` with the reason otherwise."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableDocument(f"not valid UTF-8 text: {exc.reason} at byte {exc.start}") from exc


def _level(style: tuple[str, str | int] | tuple[()], seen: list[object], markdown: bool) -> int:
    if markdown and style and style[0] == "#":
        return int(style[1])
    if markdown and style and style[0] == "under" and style[1] in _MARKDOWN_UNDERLINES:
        return _MARKDOWN_UNDERLINES[style[1]]
    if style not in seen:
        seen.append(style)
    return seen.index(style) + (10 if markdown else 0)  # odd styles nest below Markdown's


def parse_markup(text: str, kind: str) -> Document:
    """``text`` (Markdown if ``kind`` is "md") as a document of sectioned blocks."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").expandtabs(8).split("\n")
    path = SectionPath()
    seen: list[object] = []
    blocks: list[Block] = []
    for section in split_sections(strip_noise(lines)):
        if section.heading:
            path.enter(_level(section.style, seen, kind == "md"), section.heading)
            if not any(line.strip() for line in section.lines):
                continue
        blocks.extend(
            Block(block.text, path.path, code=block.code) for block in iter_blocks(section.lines)
        )
    return drop_title(Document(kind, blocks=blocks))


def parse_markup_bytes(data: bytes, kind: str, *, limits: ParseLimits = DEFAULT_LIMITS) -> Document:
    document = parse_markup(decode_text(data), kind)
    limits.check("max_paragraphs", len(document.blocks))
    return document
