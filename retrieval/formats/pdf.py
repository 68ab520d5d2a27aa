"""PDF text layers with pypdf, page by page: every block keeps its 1-based page number.

A PDF whose pages hold no text at all (a scan) raises ``NoTextLayer``: it needs OCR. An
encrypted PDF opens only when its password is empty. pypdf runs no JavaScript and fetches
nothing.

Limits: the page count is checked against ``max_pages`` before any text is extracted, and
paragraphs count against ``max_paragraphs`` as pages are read. pypdf itself bounds what one
stream may inflate to (75 MB by default).
"""

from __future__ import annotations

import io
import re

from pypdf import PdfReader

from retrieval.errors import NoTextLayer, UnreadableDocument
from retrieval.formats.document import Block, Document
from retrieval.formats.limits import DEFAULT_LIMITS, ParseLimits

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def _paragraphs(text: str) -> list[str]:
    """A page's text as paragraphs, each with its lines joined by spaces."""
    text = re.sub(r"(\w)-\n(\w)", r"\1\2", text)  # a word hyphenated across lines
    return [" ".join(p.split()) for p in _PARAGRAPH_BREAK.split(text) if p.strip()]


def parse_pdf(data: bytes, *, limits: ParseLimits = DEFAULT_LIMITS) -> Document:
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise UnreadableDocument("encrypted PDF: it needs a password")
    limits.check("max_pages", len(reader.pages))
    paragraphs = limits.tally("max_paragraphs")
    blocks = [
        Block(paragraph, page=number)
        for number, page in enumerate(reader.pages, start=1)
        for paragraph in paragraphs.each(_paragraphs(page.extract_text() or ""))
    ]
    if not blocks:
        raise NoTextLayer(f"{len(reader.pages)} page(s) without text: a scan?")
    metadata = reader.metadata
    title = str((metadata.title if metadata is not None else None) or "").strip()
    return Document("pdf", title=title, blocks=blocks)
