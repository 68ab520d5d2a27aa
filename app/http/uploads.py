"""Documents uploaded over HTTP: read (bounded), checked, then ingested off the event loop.

A body is ``multipart/form-data`` (one or more files, under any field name) or JSON
(``{"source", "text"}``), at most ``max_upload_bytes`` (413, counted as it arrives). Each
document's name must end in a suffix that ``retrieval`` ingests (415 names them); a name is
reduced to its last path component, so an upload cannot write outside the collection's sources,
normalised (NFC), refused with a 422 when it holds a control character (a NUL byte, say), and
shortened with a hash suffix when longer than ``MAX_NAME_BYTES``. A document whose bytes
disagree with its name (a PDF named ``.md``, text named ``.pdf``, NUL bytes in a text type) is
refused with a 415 that says what the bytes are (``check_content``).
The documents are parsed, chunked and embedded in a worker process (``ingest_documents``,
``retrieval.ingest.workers``), within the limits ``RAGTIME_INGEST_MAX_*`` set (413 or 422 naming
the one passed, and nothing ingested); a client that goes away cancels its ingest. Only the
publishing of the result into the running service's store holds the collection's lock: the next
search sees them.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request

from app.http.body import bounded_stream, is_json, parse_body, read_body
from app.http.disconnects import while_connected
from app.http.errors import (
    InvalidBody,
    InvalidField,
    UnsupportedMediaType,
    UploadNotStored,
)
from app.http.schemas import DocumentText
from app.settings import Settings
from retrieval import SUPPORTED_SUFFIXES, DocumentStore, Embedder, IngestReport, ParseLimits
from retrieval.formats import suffix_of
from retrieval.ingest.prepared import publish_prepared
from retrieval.ingest.workers import IngestWorkers, PrepareJob

#: At most this many documents in one upload.
MAX_FILES = 100
#: A collection's name: it names files of the store, so letters, digits, ``_ . -`` only.
COLLECTION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Document:
    source: str
    data: bytes


def check_collection_name(name: str) -> str:
    if not COLLECTION_NAME.fullmatch(name):
        raise InvalidField(
            "collection",
            "a collection's name is 1 to 64 letters, digits, '_', '.' or '-', "
            "beginning with a letter or digit",
        )
    return name


def check_source(name: str) -> str:
    """``name``'s last path component, NFC-normalised, if it is a file name of a supported type
    (else 415; 422 for a name that is no file name or holds a control character). A name longer
    than ``MAX_NAME_BYTES`` in UTF-8 is shortened, its suffix kept, with a hash of the whole
    name, so that the same long name always stores as the same file."""
    source = unicodedata.normalize("NFC", PurePosixPath(name.replace("\\", "/")).name.strip())
    if not source or source.startswith("."):
        raise InvalidField("source", f"{name[:80]!r} is not a file name")
    control = next((c for c in source if unicodedata.category(c) in ("Cc", "Cf", "Cs")), None)
    if control is not None:
        raise InvalidField(
            "source",
            f"{source[:80]!r}: a file name may not hold control characters "
            f"(found U+{ord(control):04X})",
        )
    suffix = PurePosixPath(source).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise UnsupportedMediaType(
            f"{source[:80]!r}: documents of type {suffix[:16] or '(no suffix)'!r} are not "
            f"ingested; supported: {', '.join(sorted(SUPPORTED_SUFFIXES))}"
        )
    return _shortened(source, suffix)


#: The longest file name stored, in UTF-8 bytes (file systems allow 255).
MAX_NAME_BYTES = 200


def _shortened(source: str, suffix: str) -> str:
    if len(source.encode("utf-8")) <= MAX_NAME_BYTES:
        return source
    tag = "-" + hashlib.sha256(source.encode("utf-8")).hexdigest()[:12] + suffix
    stem = source[: -len(suffix)]
    room = MAX_NAME_BYTES - len(tag.encode("utf-8"))
    while len(stem.encode("utf-8")) > room:
        stem = stem[:-1]
    return stem.rstrip() + tag


#: What a file's first bytes say it is, and the suffixes that may name it (none: not ingested).
_MAGIC: tuple[tuple[Callable[[bytes], bool], str, frozenset[str]], ...] = (
    (lambda d: b"%PDF-" in d[:1024], "a PDF document", frozenset({".pdf"})),
    (lambda d: d.startswith(b"PK\x03\x04"), "a zip archive", frozenset({".docx", ".xlsx"})),
    (lambda d: d.startswith(b"\x89PNG\r\n\x1a\n"), "a PNG image", frozenset({".png"})),
    (lambda d: d.startswith(b"\xff\xd8\xff"), "a JPEG image", frozenset({".jpg", ".jpeg"})),
    (lambda d: d[:6] in (b"GIF87a", b"GIF89a"), "a GIF image", frozenset({".gif"})),
    (lambda d: d[:4] in (b"II*\x00", b"MM\x00*"), "a TIFF image", frozenset({".tif", ".tiff"})),
    (lambda d: d[:4] == b"RIFF" and d[8:12] == b"WEBP", "a WebP image", frozenset({".webp"})),
    (lambda d: d.startswith(b"\x7fELF"), "an executable", frozenset()),
    (lambda d: d.startswith(b"\x1f\x8b"), "a gzip archive", frozenset()),
)
#: Suffixes whose files are binary: their bytes must say what the name says.
_BINARY = frozenset().union(*(names for _, _, names in _MAGIC))
#: Binary types whose mark is too short to tell from text ("BM" begins words): checked only
#: when the name says the type.
_MARKED_WHEN_NAMED = {".bmp": b"BM"}


def check_content(document: Document) -> None:
    """415 when a document's bytes and its name disagree: a PDF named ``.md`` was once indexed
    as raw PDF syntax. The bytes are told by their magic number; text holds no NUL byte."""
    data, source = document.data, document.source
    suffix = suffix_of(source) or PurePosixPath(source).suffix.lower()
    found = next(((what, names) for test, what, names in _MAGIC if test(data)), None)
    if found is not None and suffix not in found[1]:
        fix = f"name it {' or '.join(sorted(found[1]))}" if found[1] else "it is not ingested"
        raise UnsupportedMediaType(
            f"{source[:80]!r}: its bytes are {found[0]}, not what its name ({suffix}) says: {fix}"
        )
    mark = _MARKED_WHEN_NAMED.get(suffix)
    if mark is not None:
        if not data.startswith(mark):
            raise UnsupportedMediaType(
                f"{source[:80]!r}: named {suffix}, but its bytes are not an image"
            )
    elif found is None and suffix in _BINARY:
        raise UnsupportedMediaType(
            f"{source[:80]!r}: named {suffix}, but its bytes are not such a file"
        )
    elif suffix not in _BINARY and b"\x00" in data[:8192]:
        raise UnsupportedMediaType(
            f"{source[:80]!r}: named {suffix}, a text type, but its bytes are binary (NUL bytes)"
        )


async def read_documents(request: Request, limit: int) -> list[Document]:
    """The request's documents, multipart or JSON; 413, 415 or 422 when they cannot be."""
    media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media == "multipart/form-data":
        documents = await _multipart(request, limit)
    elif is_json(media):
        body = await parse_body(DocumentText, await read_body(request, limit))
        documents = [Document(check_source(body.source), body.text.encode("utf-8"))]
    else:
        raise UnsupportedMediaType(
            "send documents as multipart/form-data (files) or as JSON "
            '({"source": "notes.md", "text": "..."})'
        )
    for document in documents:
        check_content(document)
    sources = [d.source for d in documents]
    twice = sorted({s for s in sources if sources.count(s) > 1})
    if twice:
        raise InvalidField("source", f"sent more than once: {twice}")
    return documents


async def _multipart(request: Request, limit: int) -> list[Document]:
    parser = MultiPartParser(
        request.headers,
        bounded_stream(request, limit),
        max_files=MAX_FILES,
        max_fields=MAX_FILES,
        max_part_size=limit,
    )
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise InvalidBody(f"body is not valid multipart/form-data: {exc.message}") from exc
    try:
        files = [v for _, v in form.multi_items() if isinstance(v, UploadFile)]
        if not files:
            raise InvalidBody("the multipart body holds no file: send each document as a file")
        return [Document(check_source(f.filename or ""), await f.read()) for f in files]
    finally:
        await form.close()


def parse_limits(settings: Settings) -> ParseLimits:
    """What one file may make ingest do, as configured (``RAGTIME_INGEST_MAX_*``)."""
    return ParseLimits(
        max_member_bytes=settings.ingest_max_member_bytes,
        max_inflated_bytes=settings.ingest_max_inflated_bytes,
        max_pages=settings.ingest_max_pages,
        max_rows=settings.ingest_max_rows,
        max_paragraphs=settings.ingest_max_paragraphs,
        max_chunks=settings.ingest_max_chunks,
        max_image_pixels=settings.ingest_max_image_pixels,
    )


async def ingest_documents(
    documents: list[Document],
    collection: str,
    *,
    request: Request,
    settings: Settings,
    embedder: Embedder,
    store: DocumentStore,
    workers: IngestWorkers,
) -> IngestReport:
    """Ingest ``documents`` into ``collection`` with ``embedder`` (the collection's own): a
    worker process parses and embeds them (``retrieval.ingest.workers``, killed at its limits
    and when the client goes away), then the result is published, the one step that holds the
    collection's lock."""
    job = PrepareJob(
        documents=[(d.source, d.data) for d in documents],
        known=store.source_hashes(collection, embedder.backend),
        embedder=embedder,
        chunk_tokens=settings.chunk_tokens,
        overlap_tokens=settings.chunk_overlap_tokens,
        limits=parse_limits(settings),
    )
    prepared = await while_connected(request, workers.prepare(job), what="its upload")
    try:
        return await asyncio.to_thread(publish_prepared, prepared, store, collection)
    except OSError as exc:  # a full disk, say: the snapshot is not published
        raise UploadNotStored(exc.strerror or type(exc).__name__) from exc
