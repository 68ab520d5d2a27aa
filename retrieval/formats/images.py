"""Image files: they hold no text layer, so ingest reports them as needing OCR."""

from __future__ import annotations

from retrieval.errors import NoTextLayer
from retrieval.formats.document import Document
from retrieval.formats.limits import DEFAULT_LIMITS, ParseLimits

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp")


def parse_image(data: bytes, *, limits: ParseLimits = DEFAULT_LIMITS) -> Document:
    raise NoTextLayer("an image")
