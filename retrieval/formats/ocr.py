"""OCR with Tesseract: the words of a scanned page or an image, those it is unsure of left out.

Tesseract runs as Debian packages it: the ``tesseract`` command (``tesseract-ocr``) with its
English and Spanish data (``tesseract-ocr-eng``, ``tesseract-ocr-spa``), looked up on ``PATH``
when a file needs it (``find_tesseract``; ``make test`` installs them, ``make serve`` uses them
when present). Without it, a scan or an image raises ``NoTextLayer`` naming the package
(``needs_tesseract``), and ingest goes on with the other files.

One ``tesseract`` process reads one page: the image goes in on stdin as PNM, its words come back
as TSV with a confidence each (``paragraphs_of_tsv``). A word under ``MIN_CONFIDENCE``, or one
with no letter or digit, is dropped; so is a whole paragraph whose words average under it (what
Tesseract makes of specks and scribbles: a few confident letters among many unsure ones). Lines
are joined into paragraphs, a word hyphenated across lines made whole again. Tesseract runs on
one thread (``OMP_THREAD_LIMIT=1``: OpenMP made it 2.3 times slower on our 2 cores) and is
killed past ``PAGE_TIMEOUT_S``.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from retrieval.errors import NoTextLayer, UnreadableDocument

if TYPE_CHECKING:  # Pillow is imported when an image is read, not with the formats
    from PIL.Image import Image

#: The Debian package of the ``tesseract`` command, and those of its language data.
TESSERACT_PACKAGE = "tesseract-ocr"
LANGUAGES = ("eng", "spa")
#: Tesseract's confidence (0-100) a word needs to be kept, and its paragraph's words on average.
MIN_CONFIDENCE = 60.0
#: The most one page may take to read (a hostile image within the pixel limit can be slow).
PAGE_TIMEOUT_S = 60.0

_TSV_FIELDS = 12  # level page block par line word left top width height conf text
_WORD_LEVEL = "5"
_HYPHENATED = re.compile(r"(\w)-$")


@dataclass(frozen=True)
class Tesseract:
    """The ``tesseract`` command found, and the languages of ``LANGUAGES`` it has data for."""

    command: str
    languages: tuple[str, ...]

    def read(self, image: Image, *, dpi: int | None = None) -> list[str]:
        """The paragraphs Tesseract reads in ``image`` (``dpi`` when known: a rendered page),
        low-confidence words and paragraphs left out; [] when it reads none."""
        data = io.BytesIO()
        flat(image).save(data, "PPM")
        command = [self.command, "stdin", "stdout", "-l", "+".join(self.languages)]
        if dpi:
            command += ["--dpi", str(dpi)]
        try:
            done = subprocess.run(
                [*command, "tsv"],
                input=data.getvalue(),
                capture_output=True,
                timeout=PAGE_TIMEOUT_S,
                env={**os.environ, "OMP_THREAD_LIMIT": "1"},
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise UnreadableDocument(f"OCR took more than {PAGE_TIMEOUT_S:g} s on a page") from exc
        except OSError as exc:
            raise UnreadableDocument(f"OCR could not run {self.command}: {exc}") from exc
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip().splitlines()
            reason = said[-1] if said else f"exit status {done.returncode}"
            raise UnreadableDocument(f"OCR failed: {reason}")
        return paragraphs_of_tsv(done.stdout.decode(errors="replace"))


def find_tesseract() -> Tesseract | None:
    """The ``tesseract`` on ``PATH`` with data for at least one of ``LANGUAGES``, else None."""
    command = shutil.which("tesseract")
    return _probe(command) if command else None


@lru_cache(maxsize=8)
def _probe(command: str) -> Tesseract | None:
    """``command`` with the languages it lists (asked once per command)."""
    try:
        listed = subprocess.run(
            [command, "--list-langs"], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    have = set(listed.stdout.decode(errors="replace").split())
    languages = tuple(language for language in LANGUAGES if language in have)
    return Tesseract(command, languages) if languages else None


def needs_tesseract(what: str) -> NoTextLayer:
    """The error for ``what`` ("an image") when no Tesseract can read it: names the package."""
    return NoTextLayer(f"{what}; {TESSERACT_PACKAGE} is not installed")


def flat(image: Image) -> Image:
    """``image`` as Tesseract reads it best: grey or RGB, transparency over white paper."""
    from PIL import Image as PILImage

    if image.mode in ("1", "L", "RGB"):
        return image
    if image.mode == "P":
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        paper = PILImage.new("RGB", image.size, "white")
        paper.paste(image, mask=image.convert("RGBA").getchannel("A"))
        return paper
    if image.mode.startswith("I;16"):  # 16-bit grey: its range, in 8 bits
        return image.convert("I").point(lambda value: value * (1 / 256)).convert("L")
    return image.convert("RGB")


def paragraphs_of_tsv(tsv: str, min_confidence: float = MIN_CONFIDENCE) -> list[str]:
    """Tesseract's TSV output as paragraphs of the words it is sure of (see the module)."""
    paragraphs: dict[tuple[str, str, str], list[tuple[str, str, float]]] = defaultdict(list)
    for row in tsv.splitlines()[1:]:
        fields = row.split("\t")
        if len(fields) != _TSV_FIELDS or fields[0] != _WORD_LEVEL or not fields[11].strip():
            continue
        page, block, par, line = fields[1:5]
        try:
            confidence = float(fields[10])
        except ValueError:
            continue
        paragraphs[(page, block, par)].append((line, fields[11].strip(), confidence))
    out: list[str] = []
    for words in paragraphs.values():
        if sum(confidence for _, _, confidence in words) / len(words) < min_confidence:
            continue
        lines: dict[str, list[str]] = defaultdict(list)
        for line, word, confidence in words:
            if confidence >= min_confidence and any(c.isalnum() for c in word):
                lines[line].append(word)
        text = ""
        for kept in lines.values():
            joined = " ".join(kept)
            if _HYPHENATED.search(text) and joined[:1].islower():
                text = text[:-1] + joined
            else:
                text = f"{text} {joined}" if text else joined
        if text:
            out.append(text)
    return out
