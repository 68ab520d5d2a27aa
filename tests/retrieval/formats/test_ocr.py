"""OCR (retrieval/formats/ocr.py) on real files: images and PDFs of known English and Spanish
text drawn with Pillow, read by the real Tesseract, scored word by word against what was drawn.

The tests that run Tesseract are skipped where it is not installed (``make test`` installs it:
``make ocr-tools``); those of a machine without it make it unfindable (``no_tesseract``).
"""

from __future__ import annotations

import io
import random
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from app.cli import commands as cli
from app.http.schemas import SearchHit
from app.pipeline import services
from app.settings import get_settings
from bench.suites.ocr import render_text, word_accuracy, words
from retrieval import DocumentStore, LimitExceeded, NoTextLayer, UnreadableDocument, ingest_path
from retrieval.formats import ParseLimits, parse_bytes, parse_file
from retrieval.formats.ocr import (
    LANGUAGES,
    MIN_CONFIDENCE,
    Tesseract,
    find_tesseract,
    flat,
    paragraphs_of_tsv,
)
from retrieval.ingest.chunking import chunk_document
from retrieval.search.passages import passage_of_row
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.documents import make_image_pdf, make_mixed_pdf, make_pdf
from tests.helpers.store_spy import recording_writes

TESSERACT = find_tesseract()
needs_tesseract = pytest.mark.skipif(
    TESSERACT is None or TESSERACT.languages != LANGUAGES,
    reason="Debian's tesseract-ocr (with -eng and -spa) is not installed: `make ocr-tools`",
)

ENGLISH = [
    "The boiler starts with the red switch on the left side of the panel.",
    "Call support when the pressure stays below one bar for more than ten minutes.",
]
SPANISH = [
    "La caldera arranca con el interruptor rojo del lado izquierdo del panel.",
    "Llame al servicio técnico si la presión sigue por debajo de un bar durante más de "
    "diez minutos.",
]
#: Word accuracy (1 - word error rate) that clean text drawn at 32 px must reach.
ACCURACY = 0.9


def _encoded(image: Image.Image, format: str) -> bytes:
    data = io.BytesIO()
    image.save(data, format)
    return data.getvalue()


@pytest.mark.process
@needs_tesseract
@pytest.mark.parametrize("language", ["en", "es"])
@pytest.mark.parametrize(
    ("format", "suffix"), [("PNG", "png"), ("JPEG", "jpg"), ("TIFF", "tiff"), ("WEBP", "webp")]
)
def test_an_image_is_read_word_for_word(format: str, suffix: str, language: str) -> None:
    text = ENGLISH if language == "en" else SPANISH
    document = parse_bytes(_encoded(render_text(text), format), f"page.{suffix}")
    assert document.kind == suffix
    assert [block.ocr for block in document.blocks] == [True, True]  # a block per paragraph
    assert {block.page for block in document.blocks} == {None}
    for drawn, block in zip(text, document.blocks, strict=True):
        assert word_accuracy(drawn, block.text) >= ACCURACY, (drawn, block.text)
    if language == "es":  # the Spanish data reads accents
        assert {"técnico", "presión", "más"} <= set(words(document.blocks[1].text))


@pytest.mark.process
@needs_tesseract
def test_a_scanned_pdf_is_read_with_its_page_numbers(tmp_path: Path) -> None:
    pdf = make_image_pdf(tmp_path / "scan.pdf", [render_text(ENGLISH), render_text(SPANISH)])
    document = parse_file(pdf)
    assert {block.page for block in document.blocks} == {1, 2}
    assert all(block.ocr for block in document.blocks)
    for page, drawn in ((1, ENGLISH), (2, SPANISH)):
        read = " ".join(block.text for block in document.blocks if block.page == page)
        assert word_accuracy(" ".join(drawn), read) >= ACCURACY, read
    chunks = chunk_document(document, "scan.pdf")
    assert [(chunk.page, chunk.ocr, chunk.kind) for chunk in chunks] == [
        (1, True, "pdf"),
        (2, True, "pdf"),
    ]


@needs_tesseract
def test_a_pdf_with_a_text_layer_is_not_read_by_ocr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_ocr(*args: object, **kwargs: object) -> list[str]:
        raise AssertionError("a page with a text layer went to OCR")

    monkeypatch.setattr(Tesseract, "read", no_ocr)
    document = parse_file(make_pdf(tmp_path / "manual.pdf", [ENGLISH, SPANISH]))
    assert {block.page for block in document.blocks} == {1, 2}
    assert not any(block.ocr for block in document.blocks)
    assert " ".join(block.text for block in document.blocks) == " ".join(ENGLISH + SPANISH)


@pytest.mark.process
@needs_tesseract
def test_a_mixed_pdf_is_read_by_its_text_layer_and_by_ocr(tmp_path: Path) -> None:
    pdf = make_mixed_pdf(tmp_path / "mixed.pdf", ENGLISH, render_text(SPANISH))
    document = parse_file(pdf)
    first = [block for block in document.blocks if block.page == 1]
    second = [block for block in document.blocks if block.page == 2]
    assert " ".join(block.text for block in first) == " ".join(ENGLISH)
    assert first and not any(block.ocr for block in first)
    assert second and all(block.ocr for block in second)
    read = " ".join(block.text for block in second)
    assert word_accuracy(" ".join(SPANISH), read) >= ACCURACY, read
    chunks = chunk_document(document, "mixed.pdf")
    assert [(chunk.page, chunk.ocr) for chunk in chunks] == [(1, False), (2, True)]


def _scribbles(seed: int) -> Image.Image:
    """Short strokes at random: what Tesseract reads as a few confident letters in junk."""
    rng = random.Random(seed)
    image = Image.new("L", (1000, 700), 255)
    draw = ImageDraw.Draw(image)
    for _ in range(300):
        x, y = rng.randrange(1000), rng.randrange(700)
        end = (x + rng.randrange(-30, 30), y + rng.randrange(-30, 30))
        draw.line((x, y, *end), fill=0, width=rng.randrange(1, 4))
    return image


@pytest.mark.process
@needs_tesseract
def test_noise_gives_no_words() -> None:
    assert TESSERACT is not None
    rng = random.Random(7)
    pixels = Image.frombytes("L", (600, 400), rng.randbytes(600 * 400))
    with pytest.raises(UnreadableDocument, match="no text: OCR read no words in the image"):
        parse_bytes(_encoded(pixels, "PNG"), "noise.png")
    assert TESSERACT.read(_scribbles(9)) == []  # junk Tesseract is unsure of, all dropped


def test_unsure_words_and_paragraphs_are_dropped() -> None:
    header = "level\tpage\tblock\tpar\tline\tword\tleft\ttop\twidth\theight\tconf\ttext"

    def word(block: int, par: int, line: int, conf: float, text: str) -> str:
        return f"5\t1\t{block}\t{par}\t{line}\t1\t0\t0\t9\t9\t{conf}\t{text}"

    tsv = "\n".join(
        [
            header,
            "4\t1\t1\t1\t1\t0\t0\t0\t9\t9\t-1\t",  # a line row, no word
            word(1, 1, 1, 95, "Call"),
            word(1, 1, 1, 30, "x7q"),  # unsure: dropped
            word(1, 1, 1, 96, "sup-"),
            word(1, 1, 2, 91, "port"),  # hyphenated across lines: made whole
            word(1, 1, 2, 90, "|"),  # sure, but no letter or digit
            word(1, 1, 2, 93, "today."),
            word(1, 2, 1, 92, "Next"),
            word(2, 1, 1, 80, "sl"),  # a paragraph of junk: sure of one word, not of most
            word(2, 1, 1, 20, "Nee"),
            word(2, 1, 1, 25, "yun?"),
        ]
    )
    assert paragraphs_of_tsv(tsv) == ["Call support today.", "Next"]
    assert MIN_CONFIDENCE == 60


@pytest.mark.process
@needs_tesseract
def test_a_multipage_tiff_is_read_page_by_page() -> None:
    data = io.BytesIO()
    first, second = render_text(ENGLISH[:1]), render_text(SPANISH[:1])
    first.save(data, "TIFF", save_all=True, append_images=[second])
    document = parse_bytes(data.getvalue(), "fax.tif")
    assert [(block.page, block.ocr) for block in document.blocks] == [(1, True), (2, True)]
    assert word_accuracy(SPANISH[0], document.blocks[1].text) >= ACCURACY


def _png_header(width: int, height: int) -> bytes:
    """A PNG that says it is ``width`` x ``height`` and holds no pixel: decoding it would fail."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data)
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


def test_an_image_over_the_pixel_limit_is_refused_before_it_is_decoded() -> None:
    with pytest.raises(LimitExceeded, match=r"an image of 12000000 pixels.*\(max_image_pixels\)"):
        parse_bytes(_png_header(4000, 3000), "bomb.png", ParseLimits(max_image_pixels=10**7))
    with pytest.raises(LimitExceeded, match=r"at least 178956971 pixels.*max_image_pixels"):
        parse_bytes(_png_header(20_000, 20_000), "bomb.png")  # over Pillow's own cap too
    tiff = io.BytesIO()
    Image.new("L", (8, 8)).save(tiff, "TIFF", save_all=True, append_images=[Image.new("L", (8, 8))])
    with pytest.raises(LimitExceeded, match="max_pages"):
        parse_bytes(tiff.getvalue(), "fax.tiff", ParseLimits(max_pages=1))


@pytest.mark.process
@needs_tesseract
def test_a_page_is_rendered_within_the_pixel_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[tuple[int, int]] = []
    read = Tesseract.read

    def spy(self: Tesseract, image: Image.Image, *, dpi: int | None = None) -> list[str]:
        sizes.append(image.size)
        return read(self, image, dpi=dpi)

    monkeypatch.setattr(Tesseract, "read", spy)
    pdf = make_image_pdf(tmp_path / "scan.pdf", [render_text(ENGLISH)])
    parse_file(pdf, limits=ParseLimits(max_image_pixels=1_000_000))
    ((width, height),) = sizes
    assert width * height <= 1_000_000


def test_only_image_formats_are_read_whatever_the_suffix() -> None:
    """Never EPS, which Pillow would hand to Ghostscript, nor any other of its formats."""
    eps = _encoded(Image.new("L", (10, 10), 255), "EPS")
    with pytest.raises(UnreadableDocument, match="cannot parse as png: not a PNG, JPEG"):
        parse_bytes(eps, "drawing.png")


def test_transparent_images_are_read_on_white_paper() -> None:
    ink = Image.new("RGBA", (4, 4), (0, 0, 0, 0))
    ink.putpixel((1, 1), (0, 0, 0, 255))
    paper = flat(ink)
    assert paper.mode == "RGB"
    assert paper.getpixel((0, 0)) == (255, 255, 255) and paper.getpixel((1, 1)) == (0, 0, 0)


def test_the_ocr_flag_reaches_the_passage_and_the_search_hit() -> None:
    row = (7, "scan.pdf", "Scan", "", "La caldera arranca.", 2, "pdf")
    old = passage_of_row("docs", row)  # a snapshot written before OCR: no column
    assert old.ocr is False
    passage = passage_of_row("docs", (*row, 1), score=0.5)
    assert passage.ocr is True and passage.page == 2
    hit = SearchHit.from_passage(passage)
    assert hit.model_dump()["ocr"] is True
    assert SearchHit.from_passage(old).model_dump()["ocr"] is False


# -- without Tesseract ------------------------------------------------------------------------


@pytest.mark.usefixtures("no_tesseract")
def test_without_tesseract_ingest_names_the_package_and_goes_on(
    tmp_path: Path, store: DocumentStore
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Boiler\n\nThe boiler starts with the red switch.\n")
    make_image_pdf(docs / "scan.pdf", [render_text(ENGLISH)])
    render_text(SPANISH).save(docs / "photo.png")
    make_mixed_pdf(docs / "mixed.pdf", ENGLISH, render_text(SPANISH))
    report = ingest_path(docs, collection="c", embedder=HashEmbedder(), store=store)
    assert store.sources("c") == ["mixed.pdf", "notes.md"]  # mixed.pdf: its text page
    needs = "no text layer: needs OCR ({}; tesseract-ocr is not installed)"
    assert dict(report.failures) == {
        "scan.pdf": needs.format("1 page(s) without text"),
        "photo.png": needs.format("an image"),
    }
    with pytest.raises(NoTextLayer, match="tesseract-ocr is not installed"):
        parse_bytes(_encoded(render_text(ENGLISH), "PNG"), "page.png")


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The CLI's data dir, embedded with ``HashEmbedder`` (what is read matters, not MiniLM)."""
    monkeypatch.setenv("RAGTIME_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(services, "default_embedder", lambda settings: HashEmbedder())
    get_settings.cache_clear()
    yield tmp_path / "data"
    get_settings.cache_clear()


@pytest.mark.usefixtures("no_tesseract")
def test_without_tesseract_the_cli_says_so_in_one_line_a_file(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Boiler\n\nThe boiler starts with the red switch.\n")
    render_text(ENGLISH).save(docs / "photo.jpg")
    assert cli.main(["ingest", str(docs), "--collection", "notes"]) == 0
    captured = capsys.readouterr()
    assert "ingested 1 file(s)" in captured.out
    failed = [line for line in captured.err.splitlines() if line.startswith("failed:")]
    assert failed == [
        "failed: photo.jpg: no text layer: needs OCR (an image; tesseract-ocr is not installed)"
    ]


@pytest.mark.process
@needs_tesseract
def test_ingest_stores_what_ocr_read_with_its_flag(
    tmp_path: Path, store: DocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = recording_writes(monkeypatch)
    docs = tmp_path / "docs"
    docs.mkdir()
    render_text(SPANISH).save(docs / "caldera.webp")
    make_mixed_pdf(docs / "manual.pdf", ENGLISH, render_text(SPANISH[1:]))
    report = ingest_path(docs, collection="c", embedder=HashEmbedder(), store=store)
    assert report.failures == [] and store.sources("c") == ["caldera.webp", "manual.pdf"]
    assert [(c.page, c.ocr, c.kind) for c in given["caldera.webp"]] == [(None, True, "webp")]
    assert [(c.page, c.ocr) for c in given["manual.pdf"]] == [(1, False), (2, True)]
    assert word_accuracy(" ".join(SPANISH), given["caldera.webp"][0].text) >= ACCURACY
