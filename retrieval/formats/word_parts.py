"""The text of a DOCX beyond its body's paragraphs and tables: text boxes, headers, footers,
footnotes, endnotes and comments.

- A text box's paragraphs (``w:txbxContent``) follow the paragraph that anchors them, under its
  headings. Word writes a text box twice, as DrawingML and as a VML fallback
  (``mc:AlternateContent``): the fallback is left out.
- Headers and footers of every section (first-page and even-page ones too; one linked to the
  previous section's is that one) come after the body, each under the section "Header" or
  "Footer", the same text once.
- Footnotes, endnotes and comments (``word/footnotes.xml``, ``endnotes.xml``, ``comments.xml``,
  found by the main part's relationships) come last, under "Footnotes", "Endnotes" and
  "Comments"; a comment's text starts with its author ("Ada Lovelace: ..."). Word's separator
  notes are left out.

Parts python-docx does not model are parsed with its own parser (``resolve_entities=False``);
``word._count_paragraphs`` counted their paragraphs before anything was parsed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from docx.document import Document as DocxDocument
from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.oxml.parser import parse_xml
from docx.section import _Footer, _Header
from docx.table import Table
from lxml import etree

from retrieval.formats.document import Block
from retrieval.formats.spreadsheet import row_text

_NS = {
    "w": "http://schemas.openxmlformats.org/wordprocessingml/2006/main",
    "mc": "http://schemas.openxmlformats.org/markup-compatibility/2006",
}
_W = "{" + _NS["w"] + "}"
_TEXT_BOX_PARAGRAPHS = etree.XPath(
    ".//w:txbxContent[not(ancestor::mc:Fallback)]//w:p", namespaces=_NS
)
_PARAGRAPHS = etree.XPath(".//w:p", namespaces=_NS)
#: (relationship, element, section) of the notes and comments parts.
_NOTES = (
    (RT.FOOTNOTES, f"{_W}footnote", "Footnotes"),
    (RT.ENDNOTES, f"{_W}endnote", "Endnotes"),
    (RT.COMMENTS, f"{_W}comment", "Comments"),
)


def paragraph_text(p: Any) -> str:
    """A ``w:p`` element's own text (runs and hyperlinks, not a text box it anchors), its
    white space collapsed."""
    return " ".join(str(p.text).split())


def table_rows(table: Table) -> list[str]:
    """A table's rows after the first, each with the first row's cells as headers."""
    rows = [[cell.text.strip() for cell in row.cells] for row in table.rows]
    if not rows:
        return []
    header, *body = rows
    return [text for row in body if (text := row_text(header, row))] if body else []


def text_boxes(element: Any) -> list[str]:
    """The paragraphs of the text boxes anchored in ``element`` (a paragraph), in order."""
    return [text for p in _TEXT_BOX_PARAGRAPHS(element) if (text := paragraph_text(p))]


def _container_texts(container: _Header | _Footer) -> Iterator[str]:
    for item in container.iter_inner_content():
        if isinstance(item, Table):
            yield from table_rows(item)
        else:
            yield paragraph_text(item._p)
            yield from text_boxes(item._p)


def headers_and_footers(document: DocxDocument) -> list[Block]:
    """Every section's headers, then its footers, each text once."""
    blocks: list[Block] = []
    seen: set[tuple[str, str]] = set()
    for section in document.sections:
        kinds: Iterable[tuple[str, _Header | _Footer]] = (
            ("Header", section.header),
            ("Header", section.first_page_header),
            ("Header", section.even_page_header),
            ("Footer", section.footer),
            ("Footer", section.first_page_footer),
            ("Footer", section.even_page_footer),
        )
        for name, container in kinds:
            if container.is_linked_to_previous:
                continue
            for text in _container_texts(container):
                if text and (name, text) not in seen:
                    seen.add((name, text))
                    blocks.append(Block(text, (name,)))
    return blocks


def _part_element(document: DocxDocument, relationship: str) -> Any | None:
    """The root element of the part the main part relates to by ``relationship``, or None."""
    try:
        part = document.part.part_related_by(relationship)
    except KeyError:
        return None
    element = getattr(part, "element", None)
    return element if element is not None else parse_xml(part.blob)


def notes_and_comments(document: DocxDocument) -> list[Block]:
    """The footnotes, endnotes and comments, in that order."""
    blocks: list[Block] = []
    for relationship, tag, section in _NOTES:
        root = _part_element(document, relationship)
        if root is None:
            continue
        for note in root.iterchildren(tag):
            if note.get(f"{_W}type"):  # separator, continuationSeparator, ...
                continue
            texts = [text for p in _PARAGRAPHS(note) if (text := paragraph_text(p))]
            author = (note.get(f"{_W}author") or "").strip()
            if texts and author:
                texts[0] = f"{author}: {texts[0]}"
            blocks += [Block(text, (section,)) for text in texts]
    return blocks
