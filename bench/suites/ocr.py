"""``ragtime bench ocr``: how fast and how well ingest reads scanned pages (``formats.ocr``).

Pages of known text are drawn with Pillow as a scanner would give them (black on white, 11 pt
DejaVu Sans at 300 dpi on A4, in a PDF of images only; with ``--worn``, turned, blurred and
specked: ``degrade``), then parsed as ingest parses them
(``parse_bytes``: PDFium renders each page, Tesseract reads it, unsure words are dropped). The
text read is compared with the text drawn, word by word: word accuracy is 1 - the word error
rate (substitutions, deletions and insertions over the words drawn; case and punctuation
ignored). English pages are the demo corpus's prose, Spanish ones the paragraphs below.

The tests draw their images with ``render_text`` too, and score them with ``word_accuracy``.
"""

from __future__ import annotations

import argparse
import io
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.harness.paths import DEMO_CORPUS

if TYPE_CHECKING:
    from PIL.Image import Image
    from PIL.ImageFont import FreeTypeFont, ImageFont

#: DejaVu Sans (Debian's fonts-dejavu-core); Pillow's own scalable font where it is missing.
FONT_FILES = (
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"),
    Path("/usr/share/fonts/dejavu/DejaVuSans.ttf"),
)
A4_INCHES = (8.27, 11.69)

SPANISH = [
    "La caldera arranca con el interruptor rojo del lado izquierdo del panel. Si la presión "
    "sigue por debajo de un bar durante más de diez minutos, llame al servicio técnico.",
    "Las facturas de los viajes se entregan en el plazo de treinta días. Los gastos de taxi "
    "necesitan un recibo; los de hotel, la factura a nombre de la empresa.",
    "El informe trimestral llegará el viernes por la mañana. La impresora de la segunda planta "
    "se averió el martes y el técnico no vendrá hasta la semana próxima.",
    "Cada empleado puede reservar la sala de reuniones durante dos horas como máximo. Quien "
    "necesite más tiempo debe pedirlo por escrito a la oficina de administración.",
    "Antes de desconectar el equipo, guarde los documentos abiertos y cierre todas las "
    "aplicaciones. Después espere a que la luz verde se apague por completo.",
    "La biblioteca abre de lunes a sábado, de nueve a ocho. Los libros prestados se devuelven "
    "en tres semanas; una renovación es posible si nadie más los ha pedido.",
    "El tren de las siete y media sale del andén cuatro. Los viajeros con bicicleta deben "
    "subir al último vagón y dejarla en el espacio señalado.",
    "En caso de incendio, no utilice el ascensor. Baje por la escalera de emergencia y reúnase "
    "con sus compañeros en el aparcamiento, frente a la entrada principal.",
]


def font(size_px: int) -> FreeTypeFont | ImageFont:
    """DejaVu Sans at ``size_px`` pixels, else Pillow's scalable default font."""
    from PIL import ImageFont

    for path in FONT_FILES:
        if path.is_file():
            return ImageFont.truetype(str(path), size_px)
    return ImageFont.load_default(size=size_px)


def _wrap(paragraph: str, face: FreeTypeFont | ImageFont, width: int) -> list[str]:
    lines: list[str] = []
    line = ""
    for word in paragraph.split():
        longer = f"{line} {word}" if line else word
        if line and face.getlength(longer) > width:
            lines.append(line)
            line = word
        else:
            line = longer
    return [*lines, line] if line else lines


def _lines(paragraphs: list[str], face: FreeTypeFont | ImageFont, width: int) -> list[str]:
    """Wrapped lines, a blank one between paragraphs."""
    out: list[str] = []
    for paragraph in paragraphs:
        if out:
            out.append("")
        out += _wrap(paragraph, face, width)
    return out


def render_text(
    paragraphs: list[str], *, size_px: int = 32, width: int = 1600, margin: int = 64
) -> Image:
    """``paragraphs`` drawn black on white (mode L), as tall as they need."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    face = font(size_px)
    lines = _lines(paragraphs, face, width - 2 * margin)
    step = round(size_px * 1.4)
    image = PILImage.new("L", (width, 2 * margin + step * len(lines)), 255)
    draw = ImageDraw.Draw(image)
    for n, line in enumerate(lines):
        draw.text((margin, margin + n * step), line, font=face, fill=0)
    return image


def degrade(image: Image, seed: int = 0) -> Image:
    """``image`` as a worn scan: turned by 0.8 degrees, blurred, with 0.5% of its pixels
    flipped to black (specks of dust)."""
    import random

    from PIL import Image as PILImage
    from PIL import ImageFilter

    turned = image.rotate(0.8, resample=PILImage.Resampling.BICUBIC, fillcolor=255)
    worn = turned.filter(ImageFilter.GaussianBlur(0.8))
    rng = random.Random(seed)
    pixels = worn.load()
    assert pixels is not None
    width, height = worn.size
    for _ in range(width * height // 200):
        pixels[rng.randrange(width), rng.randrange(height)] = 0
    return worn


@dataclass(frozen=True)
class Page:
    image: Image
    text: str  # what is drawn on it
    language: str


def pages(
    paragraphs: list[str], count: int, language: str, *, dpi: int = 300, worn: bool = False
) -> list[Page]:
    """``count`` A4 pages at ``dpi`` filled with ``paragraphs`` (cycled), 11 pt, 1 in margins
    (``worn``: each ``degrade``d)."""
    from PIL import Image as PILImage
    from PIL import ImageDraw

    width, height = (round(inches * dpi) for inches in A4_INCHES)
    size, margin = round(11 / 72 * dpi), dpi
    face = font(size)
    step = round(size * 1.35)
    per_page = (height - 2 * margin) // step
    lines = _lines(paragraphs, face, width - 2 * margin)
    while len(lines) < per_page * count:
        lines += ["", *_lines(paragraphs, face, width - 2 * margin)]
    out: list[Page] = []
    for start in range(0, per_page * count, per_page):
        drawn = lines[start : start + per_page]
        image = PILImage.new("L", (width, height), 255)
        draw = ImageDraw.Draw(image)
        for n, line in enumerate(drawn):
            draw.text((margin, margin + n * step), line, font=face, fill=0)
        image = degrade(image, seed=len(out)) if worn else image
        out.append(Page(image, "\n".join(drawn), language))
    return out


def words(text: str) -> list[str]:
    """``text``'s words, lower-cased, punctuation taken off (accents kept)."""
    found = ("".join(c for c in token if c.isalnum()) for token in text.lower().split())
    return [word for word in found if word]


def word_accuracy(expected: str, got: str) -> float:
    """1 - the word error rate of ``got`` against ``expected`` (0 at worst)."""
    want, have = words(expected), words(got)
    if not want:
        return 1.0 if not have else 0.0
    previous = list(range(len(have) + 1))
    for i, word in enumerate(want, start=1):
        current = [i]
        for j, other in enumerate(have, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != other))
            )
        previous = current
    return max(0.0, 1.0 - previous[-1] / len(want))


def english_paragraphs(corpus: Path = DEMO_CORPUS) -> list[str]:
    """The demo corpus's prose paragraphs (no code, headings, directives or markup lines)."""
    out: list[str] = []
    for path in sorted(corpus.rglob("*.rst.txt")):
        for block in re.split(r"\n\s*\n", path.read_text()):
            lines = block.splitlines()
            if not lines or any(line[:1].isspace() or line.startswith("..") for line in lines):
                continue
            text = " ".join(lines)
            if len(text) > 200 and not re.search(r"[=*~^`-]{4}|::|>>>", text):
                out.append(re.sub(r"[`*]|:\w+:", "", text))
    return out


@dataclass
class OcrResult:
    pages: int
    words: int
    dpi: int
    worn: bool
    tesseract: str
    runs_s: list[float] = field(default_factory=list)
    accuracy: dict[str, float] = field(default_factory=dict)  # per language, and "all"

    @property
    def pages_per_s(self) -> float:
        return self.pages / statistics.median(self.runs_s)


def tesseract_version() -> str:
    from retrieval.formats.ocr import find_tesseract

    found = find_tesseract()
    if found is None:
        return ""
    said = subprocess.run([found.command, "--version"], capture_output=True, check=False)
    return said.stdout.decode(errors="replace").split("\n", 1)[0].strip()


def measure(count: int = 6, runs: int = 3, *, dpi: int = 300, worn: bool = False) -> OcrResult:
    """``count`` pages (half English, half Spanish) parsed as scanned PDFs ``runs`` times."""
    from retrieval.formats import parse_bytes

    half = count // 2
    drawn = pages(english_paragraphs(), count - half, "en", dpi=dpi, worn=worn)
    drawn += pages(SPANISH, half, "es", dpi=dpi, worn=worn)
    scans: list[tuple[str, bytes, list[Page]]] = []
    for language in ("en", "es"):
        group = [page for page in drawn if page.language == language]
        if group:
            data = io.BytesIO()
            first, *rest = (page.image for page in group)
            first.save(data, "PDF", resolution=dpi, save_all=True, append_images=rest)
            scans.append((language, data.getvalue(), group))
    result = OcrResult(
        pages=len(drawn),
        words=sum(len(words(page.text)) for page in drawn),
        dpi=dpi,
        worn=worn,
        tesseract=tesseract_version(),
    )
    read: dict[str, list[tuple[str, str]]] = {}
    for _ in range(runs):
        started = time.perf_counter()
        parsed = [(lang, parse_bytes(data, "scan.pdf"), group) for lang, data, group in scans]
        result.runs_s.append(time.perf_counter() - started)
        read = {
            lang: [
                (page.text, " ".join(b.text for b in doc.blocks if b.page == n and b.ocr))
                for n, page in enumerate(group, start=1)
            ]
            for lang, doc, group in parsed
        }
    for lang, pairs in read.items():
        result.accuracy[lang] = _pooled(pairs)
    result.accuracy["all"] = _pooled([pair for pairs in read.values() for pair in pairs])
    return result


def _pooled(pairs: list[tuple[str, str]]) -> float:
    """Word accuracy over several pages, each weighed by its words."""
    total = sum(len(words(expected)) for expected, _ in pairs)
    return sum(word_accuracy(e, g) * len(words(e)) for e, g in pairs) / total


def table(result: OcrResult) -> str:
    runs = ", ".join(f"{s:.2f}" for s in result.runs_s)
    accuracy = ", ".join(f"{lang} {value:.3f}" for lang, value in result.accuracy.items())
    return (
        f"OCR of scanned PDF pages ({result.tesseract or 'tesseract not found'}): "
        f"{result.pages} {'worn ' if result.worn else ''}A4 pages at {result.dpi} dpi, "
        f"{result.words} words\n"
        f"  pages per second: {result.pages_per_s:.2f} (median of runs of {runs} s)\n"
        f"  word accuracy: {accuracy}"
    )


def register(subparsers: Any) -> None:
    """Add ``ocr`` to ``ragtime bench``'s subcommands."""
    ocr = subparsers.add_parser(
        "ocr",
        help="OCR of scanned pages: pages per second and word accuracy",
        description="In-process, no server or model: A4 pages of known English and Spanish "
        "text drawn with Pillow at 300 dpi, put in a PDF of images only and parsed as ingest "
        "parses it (PDFium renders, Tesseract reads); the text read is scored against the text "
        "drawn (bench/suites/ocr.py). Needs Debian's tesseract-ocr, -eng and -spa (`make "
        "ocr-tools`).",
    )
    ocr.add_argument("--pages", type=int, default=6, help="pages, half English, half Spanish")
    ocr.add_argument("--runs", type=int, default=3, help="the time is the median of the runs")
    ocr.add_argument("--dpi", type=int, default=300, help="resolution the pages are drawn at")
    ocr.add_argument("--worn", action="store_true", help="pages turned, blurred and specked")
    ocr.add_argument("--json", type=Path, help="write the figures here")
    ocr.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from bench.harness.record import write_figures
    from retrieval.formats.ocr import TESSERACT_PACKAGE, find_tesseract

    if find_tesseract() is None:
        print(f"error: OCR needs {TESSERACT_PACKAGE} (make ocr-tools)", file=sys.stderr)
        return 1  # the machine lacks a tool: the command line was right
    result = measure(args.pages, args.runs, dpi=args.dpi, worn=args.worn)
    print(table(result))
    if args.json:
        figures = dataclasses.asdict(result) | {"pages_per_s": result.pages_per_s}
        write_figures(figures, args.json)
    return 0
