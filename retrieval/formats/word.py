"""DOCX with python-docx: ``Title`` and ``Heading N`` paragraphs become sections, tables rows;
text boxes, headers, footers, footnotes, endnotes and comments are read too (``word_parts``).

python-docx parses the package's XML with lxml and ``resolve_entities=False``: no entity is
expanded and nothing is fetched. A table's row is written with its header row's cells
("Header: value; ..."), as spreadsheets are.

Limits: the package's members are measured before python-docx inflates them
(``archive.check_archive``), and the document's paragraphs (those in table cells and text boxes
too) and table rows are counted as the XML of the main part, the headers, footers, notes and
comments streams past, before python-docx parses it (and the body again in the parsed tree, for
a package whose main part is named otherwise).
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import replace

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml import etree

from retrieval.formats.archive import check_archive
from retrieval.formats.document import Block, Document, SectionPath, drop_title
from retrieval.formats.limits import DEFAULT_LIMITS, ParseLimits
from retrieval.formats.word_parts import (
    headers_and_footers,
    notes_and_comments,
    table_rows,
    text_boxes,
)

_HEADING_STYLE = re.compile(r"^heading (\d)$", re.IGNORECASE)


def _heading_level(paragraph: Paragraph) -> int | None:
    name = (paragraph.style.name if paragraph.style is not None else "") or ""
    if name.lower() == "title":
        return 0
    match = _HEADING_STYLE.match(name)
    return int(match[1]) if match else None


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
#: The parts whose text is read: the main part, headers, footers, notes and comments.
_TEXT_PART = re.compile(r"^word/(document|header\d*|footer\d*|footnotes|endnotes|comments)\.xml$")


def _count_paragraphs(data: bytes, limits: ParseLimits) -> None:
    """Count the text parts' paragraphs and table rows, all together, as their XML streams
    past, each element dropped once counted, and stop at the limit: a paragraph bomb is refused
    before python-docx builds its tree (memory held: one paragraph)."""
    counted = limits.tally("max_paragraphs")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for name in archive.namelist():
            if not _TEXT_PART.match(name):
                continue  # a main part named otherwise is counted in the parsed tree instead
            with archive.open(name) as part:
                events = etree.iterparse(
                    part, events=("end",), tag=(f"{_W}p", f"{_W}tr"), resolve_entities=False
                )
                for _, element in events:
                    counted.add()
                    element.clear()
                    while element.getprevious() is not None:
                        del element.getparent()[0]


def parse_docx(data: bytes, *, limits: ParseLimits = DEFAULT_LIMITS) -> Document:
    check_archive(data, limits)
    _count_paragraphs(data, limits)
    document = docx.Document(io.BytesIO(data))
    paragraphs_and_rows = int(document.element.xpath("count(.//w:p | .//w:tr)"))
    limits.check("max_paragraphs", paragraphs_and_rows)
    path = SectionPath()
    blocks: list[Block] = []
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            blocks.extend(Block(text, path.path) for text in table_rows(item))
            continue
        text = " ".join(item.text.split())
        level = _heading_level(item) if text else None
        if level is None:
            blocks += [Block(text, path.path)] if text else []
        else:
            path.enter(level, text)
        blocks.extend(Block(boxed, path.path) for boxed in text_boxes(item._p))
    title = (document.core_properties.title or "").strip()
    body = drop_title(Document("docx", title=title, blocks=blocks))
    extra = headers_and_footers(document) + notes_and_comments(document)
    return replace(body, blocks=body.blocks + extra)
