"""PDF text layers with pypdf, page by page: every block keeps its 1-based page number.

A page whose text layer is empty or nearly so (fewer than ``MIN_TEXT_CHARS`` letters and
digits: a scan, perhaps with a stamped number) is rendered with PDFium (pypdfium2) and read by
OCR (``formats.ocr``): its blocks are marked ``ocr``. Where OCR reads no word on such a page,
what little its text layer holds is kept. Without Tesseract, a PDF with no text at all raises
``NoTextLayer`` naming the package to install; one with some text pages keeps those, and the
scanned pages are left out with a warning. An encrypted PDF opens only when its password is
empty. Neither pypdf nor PDFium runs JavaScript or fetches anything.

Limits: the page count is checked against ``max_pages`` before any text is extracted, and
paragraphs count against ``max_paragraphs`` as pages are read. pypdf itself bounds what one
stream may inflate to (75 MB by default). A page is rendered for OCR at ``OCR_DPI``, or at the
resolution that keeps it within ``max_image_pixels`` when it is larger than a poster.
"""

from __future__ import annotations

import io
import logging
import math
import re
import threading
from typing import Any

from pypdf import PdfReader

from retrieval.errors import UnreadableDocument
from retrieval.formats.document import Block, Document
from retrieval.formats.limits import DEFAULT_LIMITS, ParseLimits
from retrieval.formats.ocr import TESSERACT_PACKAGE, Tesseract, find_tesseract, needs_tesseract

log = logging.getLogger(__name__)

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
#: A page whose text layer holds fewer letters and digits than this is read by OCR.
MIN_TEXT_CHARS = 32
#: The resolution a page is rendered at for OCR: Tesseract reads best from 300 dpi.
OCR_DPI = 300
#: PDFium is not thread-safe (pypdfium2's documentation): one rendering at a time.
_PDFIUM = threading.Lock()


def _paragraphs(text: str) -> list[str]:
    """A page's text as paragraphs, each with its lines joined by spaces."""
    text = re.sub(r"(\w)-\n(\w)", r"\1\2", text)  # a word hyphenated across lines
    return [" ".join(p.split()) for p in _PARAGRAPH_BREAK.split(text) if p.strip()]


def nearly_empty(paragraphs: list[str]) -> bool:
    """Whether a page's text layer is too thin to be its text: it is read by OCR."""
    return sum(c.isalnum() for p in paragraphs for c in p) < MIN_TEXT_CHARS


class _PageReader:
    """Renders pages of one PDF with PDFium (opened at the first page asked) and reads them
    with Tesseract."""

    def __init__(self, data: bytes, tesseract: Tesseract, limits: ParseLimits) -> None:
        self._data = data
        self._tesseract = tesseract
        self._limits = limits
        self._document: Any = None

    def read(self, number: int) -> list[str]:
        """The paragraphs OCR reads on page ``number`` (1-based)."""
        import pypdfium2

        with _PDFIUM:
            if self._document is None:
                try:
                    self._document = pypdfium2.PdfDocument(self._data)
                except pypdfium2.PdfiumError as exc:  # pypdf read it, PDFium cannot
                    log.warning("PDFium cannot open a PDF to OCR its pages: %s", exc)
                    self._document = ()
            if number > len(self._document):
                return []
            page = self._document[number - 1]
            try:
                width, height = page.get_size()
                if width < 1 or height < 1:
                    return []
                most = self._limits.max_image_pixels
                scale = min(OCR_DPI / 72, math.sqrt(most / (width * height)))
                if scale * min(width, height) < 1:
                    return []
                image = page.render(scale=scale, grayscale=True).to_pil()
            finally:
                page.close()
        try:
            return self._tesseract.read(image, dpi=round(scale * 72))
        except UnreadableDocument as exc:
            raise UnreadableDocument(f"page {number}: {exc}") from exc

    def close(self) -> None:
        if self._document:
            with _PDFIUM:
                self._document.close()


def parse_pdf(data: bytes, *, limits: ParseLimits = DEFAULT_LIMITS) -> Document:
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise UnreadableDocument("encrypted PDF: it needs a password")
    limits.check("max_pages", len(reader.pages))
    paragraphs = limits.tally("max_paragraphs")
    tesseract = find_tesseract()
    ocr = _PageReader(data, tesseract, limits) if tesseract is not None else None
    blocks: list[Block] = []
    scanned = 0
    try:
        for number, page in enumerate(reader.pages, start=1):
            text = _paragraphs(page.extract_text() or "")
            if nearly_empty(text):
                scanned += 1
                read = ocr.read(number) if ocr is not None else []
                if read:
                    blocks += [Block(p, page=number, ocr=True) for p in paragraphs.each(read)]
                    continue
            blocks += [Block(p, page=number) for p in paragraphs.each(text)]
    finally:
        if ocr is not None:
            ocr.close()
    if not blocks:
        if ocr is None:
            raise needs_tesseract(f"{len(reader.pages)} page(s) without text")
        raise UnreadableDocument(f"no text: OCR read no words on {scanned} page(s) without text")
    if scanned and ocr is None:
        log.warning(
            "%d of %d PDF page(s) without a text layer not read: OCR needs %s, not installed",
            scanned,
            len(reader.pages),
            TESSERACT_PACKAGE,
        )
    metadata = reader.metadata
    title = str((metadata.title if metadata is not None else None) or "").strip()
    return Document("pdf", title=title, blocks=blocks)
