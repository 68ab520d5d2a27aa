"""DOCX with python-docx: ``Title`` and ``Heading N`` paragraphs become sections, tables rows.

python-docx parses the package's XML with lxml and ``resolve_entities=False``: no entity is
expanded and nothing is fetched. A table's row is written with its header row's cells
("Header: value; ..."), as spreadsheets are.

Limits: the package's members are measured before python-docx inflates them
(``archive.check_archive``), and the document's paragraphs (those in table cells too) and table
rows are counted as the main part's XML streams past, before python-docx parses it (and again
in the parsed tree, for a package whose main part is named otherwise).
"""

from __future__ import annotations

import io
import re
import zipfile

import docx
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml import etree

from retrieval.formats.archive import check_archive
from retrieval.formats.document import Block, Document, SectionPath, drop_title
from retrieval.formats.limits import DEFAULT_LIMITS, ParseLimits
from retrieval.formats.spreadsheet import row_text

_HEADING_STYLE = re.compile(r"^heading (\d)$", re.IGNORECASE)


def _heading_level(paragraph: Paragraph) -> int | None:
    name = (paragraph.style.name if paragraph.style is not None else "") or ""
    if name.lower() == "title":
        return 0
    match = _HEADING_STYLE.match(name)
    return int(match[1]) if match else None


def _table_rows(table: Table) -> list[str]:
    rows = [[cell.text.strip() for cell in row.cells] for row in table.rows]
    if not rows:
        return []
    header, *body = rows
    return [text for row in body if (text := row_text(header, row))] if body else []


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MAIN_PART = "word/document.xml"


def _count_paragraphs(data: bytes, limits: ParseLimits) -> None:
    """Count the main part's paragraphs and table rows as its XML streams past, each element
    dropped once counted, and stop at the limit: a paragraph bomb is refused before python-docx
    builds its tree (memory held: one paragraph)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        if _MAIN_PART not in archive.namelist():
            return  # named otherwise: counted in the parsed tree instead
        with archive.open(_MAIN_PART) as part:
            counted = limits.tally("max_paragraphs")
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
            blocks.extend(Block(text, path.path) for text in _table_rows(item))
            continue
        text = " ".join(item.text.split())
        if not text:
            continue
        level = _heading_level(item)
        if level is None:
            blocks.append(Block(text, path.path))
        else:
            path.enter(level, text)
    title = (document.core_properties.title or "").strip()
    return drop_title(Document("docx", title=title, blocks=blocks))
