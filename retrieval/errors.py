"""Retrieval errors, each carrying the HTTP status the app answers with.

    RetrievalError (500)           anything retrieval could not do
    ├── UnknownCollection (404)    a request named a collection that holds nothing
    ├── EmbeddingMismatch (409)    the collection was embedded by another embedding backend
    ├── BrokenIndex (503)          the collection holds chunks but its index could not be
    │                              loaded (missing, truncated): re-ingest it
    ├── InvalidFilter (422)        a search filter's value is malformed or matches no file type
    ├── RerankerUnavailable (503)  no cross-encoder configured, or it failed to load or to
    │                              score; the app skips reranking
    ├── NothingToIngest (422)      a path to ingest holds no file of a format ingest reads
    │                              (an empty folder): nothing is written
    └── UnreadableDocument (422)   a file to ingest could not be parsed; the message says why
        ├── NoTextLayer (422)      a scanned PDF or an image, and no Tesseract to read it
        │                          (OCR): the message names the package to install
        └── LimitExceeded (413)    a file holds more than a parse limit allows (inflated
                                   bytes, pages, rows, paragraphs); the message names it

Outside failures (sentence-transformers, torch, FAISS) enter as ``raise ... from exc``.
"""

from __future__ import annotations

from collections.abc import Iterable


class RetrievalError(Exception):
    """Base class; ``status_code`` is the HTTP status the app maps it to."""

    status_code: int = 500


class UnknownCollection(RetrievalError):
    """No such collection; the message names it and lists the ones that exist."""

    status_code = 404

    def __init__(
        self, message: str, *, collection: str | None = None, known: Iterable[str] = ()
    ) -> None:
        super().__init__(message)
        self.collection = collection
        self.known = sorted(known)

    @classmethod
    def named(cls, collection: str, known: Iterable[str]) -> UnknownCollection:
        """``unknown collection 'x'; known: ['a', 'b']``, with both kept as attributes."""
        names = sorted(known)
        message = f"unknown collection {collection!r}; known: {names}"
        return cls(message, collection=collection, known=names)


class EmbeddingMismatch(RetrievalError):
    """The collection's vectors come from another embedding backend than the query's: its
    scores would be meaningless. Re-ingesting it with this backend (or configuring the one that
    built it) resolves it."""

    status_code = 409

    def __init__(self, message: str, *, collection: str, built_with: str, wanted: str) -> None:
        super().__init__(message)
        self.collection = collection
        self.built_with = built_with
        self.wanted = wanted


class InvalidFilter(RetrievalError):
    """A search filter that cannot apply; ``field`` names it (``source_prefix``, ``kind``)."""

    status_code = 422

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


class RerankerUnavailable(RetrievalError):
    """Reranking cannot run; ``str(exc)`` says why."""

    status_code = 503


class BrokenIndex(RetrievalError):
    """A collection holds chunks, but its index is missing or cannot be read: it cannot be
    searched until it is re-ingested (``DocumentStore.check`` says why, ``/readyz`` shows it)."""

    status_code = 503


class NothingToIngest(RetrievalError):
    """A path to ingest is an empty folder, a folder of files of no supported format, or such a
    file: the message names it and the formats ingest reads. Nothing is written (an ingest of
    nothing would remove every file a folder held before: an unmounted share looks empty)."""

    status_code = 422


class UnreadableDocument(RetrievalError):
    """A file could not be read as its format; ``str(exc)`` is the reason, ingest names the
    file beside it and goes on with the others."""

    status_code = 422


class NoTextLayer(UnreadableDocument):
    """A scanned PDF or an image, and OCR cannot run (``retrieval.formats.ocr``): there is no
    text to index until it has read it."""

    def __init__(self, what: str = "") -> None:
        super().__init__(f"no text layer: needs OCR{f' ({what})' if what else ''}")


class LimitExceeded(UnreadableDocument):
    """A file holds more than one of the parse limits (``retrieval.formats.ParseLimits``)
    allows: ``limit`` names the limit ("max_pages"), ``value`` is its value, and the message
    says what was found: "5000 pages: more than the limit of 2000 pages (max_pages)"."""

    status_code = 413

    def __init__(
        self, found: str, *, limit: str, value: int, unit: str, status_code: int = 413
    ) -> None:
        super().__init__(f"{found}: more than the limit of {value} {unit} ({limit})")
        self.status_code = status_code  # 422 for time: the file is not too large, too hard
        self.found = found
        self.limit = limit
        self.value = value
        self.unit = unit

    def of(self, source: str) -> LimitExceeded:
        """The same, its message naming the file ``source``."""
        return LimitExceeded(
            f"{source}: {self.found}", limit=self.limit, value=self.value, unit=self.unit
        )
