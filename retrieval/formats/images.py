"""Image files, read by OCR (``formats.ocr``): every block is marked ``ocr``.

Pillow reads the header first: an image over ``max_image_pixels`` (a frame of a TIFF, each) is
refused before anything is decoded, and so is a TIFF of more frames than ``max_pages``; only
the formats of ``PILLOW_FORMATS`` are read, whatever the bytes hold. A multi-page TIFF (what a
scanner or a fax makes) is read frame by frame, each its own page; of any other format, only
the first frame. Without Tesseract an image raises ``NoTextLayer`` naming the package to
install; an image in which OCR reads no word is refused as holding no text.
"""

from __future__ import annotations

import io

from retrieval.errors import UnreadableDocument
from retrieval.formats.document import Block, Document
from retrieval.formats.limits import DEFAULT_LIMITS, ParseLimits
from retrieval.formats.ocr import find_tesseract, needs_tesseract

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp")
#: What Pillow may read an image file as, whatever its suffix says (a ".jpg" that is a PNG is
#: read): never EPS, which Pillow hands to Ghostscript, nor its other formats.
PILLOW_FORMATS = ("PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP")


def parse_image(data: bytes, *, limits: ParseLimits = DEFAULT_LIMITS, kind: str = "") -> Document:
    from PIL import Image, ImageSequence

    try:
        image = Image.open(io.BytesIO(data), formats=PILLOW_FORMATS)
    except Image.UnidentifiedImageError as exc:
        what = "not a PNG, JPEG, GIF, BMP, TIFF or WebP image"
        raise UnreadableDocument(f"cannot parse as {kind or 'an image'}: {what}") from exc
    except Image.DecompressionBombError:  # over twice Pillow's own cap, checked as it opens
        most = 2 * (Image.MAX_IMAGE_PIXELS or 0) + 1
        limits.check("max_image_pixels", most, what="an image of ", at_least=True)
        raise
    with image:
        frames = getattr(image, "n_frames", 1) if image.format == "TIFF" else 1
        limits.check("max_pages", frames)
        limits.check("max_image_pixels", image.width * image.height, what="an image of ")
        tesseract = find_tesseract()
        if tesseract is None:
            raise needs_tesseract("an image")
        paragraphs = limits.tally("max_paragraphs")
        blocks: list[Block] = []
        for number, frame in enumerate(ImageSequence.Iterator(image), start=1):
            if number > frames:
                break
            limits.check("max_image_pixels", frame.width * frame.height, what="a frame of ")
            page = number if frames > 1 else None
            read = tesseract.read(frame)
            blocks += [Block(text, page=page, ocr=True) for text in paragraphs.each(read)]
    if not blocks:
        raise UnreadableDocument("no text: OCR read no words in the image")
    return Document(kind, blocks=blocks)
