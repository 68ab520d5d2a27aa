"""Document formats: a registry from file suffix to the parser that reads that format.

    suffix                              parser (module)            kind
    .md .markdown                       markup.parse_markup_bytes  md
    .rst .rst.txt                       markup                     rst
    .txt                                markup                     txt
    .html .htm                          html.parse_html            html
    .pdf                                pdf.parse_pdf (OCR: ocr)   pdf
    .docx                               word.parse_docx            docx
    .eml                                email_message.parse_eml    eml (attachments: their own)
    .xlsx                               spreadsheet.parse_xlsx     xlsx
    .csv                                spreadsheet.parse_csv      csv
    .png .jpg .jpeg .gif .bmp .tif ...  images.parse_image (OCR)   png, jpg, ... (its suffix)

``parse_file`` reads a file with its parser. Whatever goes wrong comes out as
``UnreadableDocument`` with the reason (``NoTextLayer`` for a scan or an image where Tesseract,
which reads them, is not installed: ``ocr``), so ingest can name the file and go on. No parser
runs code from a file or fetches anything. Every parser keeps to ``ParseLimits`` (inflated
bytes, pages, rows, paragraphs, image pixels; ``limits``) while it reads, and raises
``LimitExceeded`` naming the limit a file is over.

A file may carry others: ``parse_with_attachments`` gives an e-mail's document and its
attachments of the types above (``CARRIERS``), each for ingest to read as a file of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Protocol, TypeVar

from retrieval.errors import UnreadableDocument
from retrieval.formats.document import PATH_SEPARATOR, Attachment, Block, Document
from retrieval.formats.email_message import parse_eml, read_eml
from retrieval.formats.html import parse_html
from retrieval.formats.images import IMAGE_SUFFIXES, parse_image
from retrieval.formats.limits import DEFAULT_LIMITS, ParseLimits
from retrieval.formats.markup import parse_markup, parse_markup_bytes
from retrieval.formats.pdf import parse_pdf
from retrieval.formats.spreadsheet import parse_csv, parse_xlsx
from retrieval.formats.word import parse_docx


class Parser(Protocol):
    """Reads one format's bytes as a document, within ``limits``."""

    def __call__(self, data: bytes, *, limits: ParseLimits = ...) -> Document: ...


def _own_document(name: str) -> bool:
    """Whether a carried file named ``name`` (an e-mail's attachment) is read as a document of
    its own: it is of a type ingest reads."""
    return suffix_of(name) is not None


#: Longest suffixes first, so ".rst.txt" is reST and not plain text.
PARSERS: dict[str, Parser] = {
    ".rst.txt": partial(parse_markup_bytes, kind="rst"),
    ".markdown": partial(parse_markup_bytes, kind="md"),
    ".md": partial(parse_markup_bytes, kind="md"),
    ".rst": partial(parse_markup_bytes, kind="rst"),
    ".txt": partial(parse_markup_bytes, kind="txt"),
    ".html": parse_html,
    ".htm": parse_html,
    ".pdf": parse_pdf,
    ".docx": parse_docx,
    ".eml": partial(parse_eml, separate=_own_document),
    ".xlsx": parse_xlsx,
    ".csv": parse_csv,
    **{suffix: partial(parse_image, kind=suffix[1:]) for suffix in IMAGE_SUFFIXES},
}
#: The suffixes ingest reads (images among them, read by OCR).
SUPPORTED_SUFFIXES: tuple[str, ...] = tuple(sorted(PARSERS, key=len, reverse=True))
#: The formats whose files carry others: their reader gives the document and the files carried.
CARRIERS: dict[str, Callable[..., tuple[Document, list[Attachment]]]] = {
    ".eml": partial(read_eml, separate=_own_document),
}


def suffix_of(name: str) -> str | None:
    """The registered suffix ``name`` ends with (case-insensitive), or None."""
    lower = name.lower()
    return next((s for s in SUPPORTED_SUFFIXES if lower.endswith(s) and lower != s), None)


def stem_of(source: str) -> str:
    """``controlflow`` for ``tutorial/controlflow.rst.txt``."""
    name = PurePosixPath(source).name
    suffix = suffix_of(name)
    return name[: -len(suffix)] if suffix else name


def parse_bytes(data: bytes, name: str, limits: ParseLimits | None = None) -> Document:
    """``data`` read as the format of file ``name`` within ``limits`` (the defaults when None);
    ``UnreadableDocument`` says why not, ``LimitExceeded`` (one) which limit it is over."""
    suffix = _suffix(name)
    return _guarded(suffix, lambda: PARSERS[suffix](data, limits=limits or DEFAULT_LIMITS))


def parse_with_attachments(
    data: bytes, name: str, limits: ParseLimits | None = None
) -> tuple[Document, list[Attachment]]:
    """``parse_bytes``, and the files that file ``name`` carries which are documents of their
    own: an e-mail's attachments of a type ingest reads, unread (each is read by
    ``parse_bytes`` under its own name, within the limits of a file); none for other formats."""
    suffix = _suffix(name)
    carrier = CARRIERS.get(suffix)
    if carrier is None:
        return parse_bytes(data, name, limits), []
    return _guarded(suffix, lambda: carrier(data, limits=limits or DEFAULT_LIMITS))


def _suffix(name: str) -> str:
    suffix = suffix_of(name)
    if suffix is None:
        raise UnreadableDocument(f"unsupported file type: {PurePosixPath(name).suffix or name}")
    return suffix


T = TypeVar("T")


def _guarded(suffix: str, read: Callable[[], T]) -> T:
    """``read()``, whatever goes wrong in it raised as ``UnreadableDocument``."""
    try:
        return read()
    except UnreadableDocument:  # LimitExceeded and NoTextLayer among them: kept as they are
        raise
    except RecursionError as exc:
        raise UnreadableDocument(f"cannot parse as {suffix}: nested too deeply") from exc
    except Exception as exc:  # a third-party parser's own errors are many and undocumented
        reason = str(exc).strip() or type(exc).__name__
        raise UnreadableDocument(f"cannot parse as {suffix[1:]}: {reason}") from exc


def parse_file(path: Path, name: str | None = None, limits: ParseLimits | None = None) -> Document:
    """The file at ``path`` parsed by its suffix (or ``name``'s) within ``limits``; ``OSError``
    if unreadable."""
    return parse_bytes(Path(path).read_bytes(), name or Path(path).name, limits)


__all__ = [
    "PARSERS",
    "PATH_SEPARATOR",
    "SUPPORTED_SUFFIXES",
    "Attachment",
    "Block",
    "Document",
    "ParseLimits",
    "Parser",
    "parse_bytes",
    "parse_file",
    "parse_markup",
    "parse_with_attachments",
    "stem_of",
    "suffix_of",
]
