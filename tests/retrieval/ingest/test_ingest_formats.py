"""Ingest of a folder of many formats, with ``HashEmbedder`` (no model): what is stored, what is
reported by name (needs OCR, cannot parse), duplicates stored once, progress, batching."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from retrieval import DocumentStore, IngestProgress, ingest_path
from retrieval.ingest.prepared import embed_by_length
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.documents import (
    make_broken,
    make_docx,
    make_eml,
    make_pdf,
    make_scanned_pdf,
    make_xlsx,
)
from tests.helpers.store_spy import recording_writes

FOOTER = "This document is confidential and meant for its addressees only."


@pytest.fixture
def mixed(tmp_path: Path, no_tesseract: None) -> Path:
    """Files of every format, and some that fail; without Tesseract
    (tests/retrieval/formats/test_ocr.py ingests scans with it)."""
    root = tmp_path / "mixed"
    root.mkdir()
    (root / "a.md").write_text(f"# Lists\n\nA list holds items in order.\n\n{FOOTER}\n")
    (root / "b.rst.txt").write_text(f"Loops\n=====\n\nA for loop walks a list.\n\n{FOOTER}\n")
    (root / "c.html").write_text("<title>Sets</title><h1>Sets</h1><p>A set has no order.</p>")
    (root / "d.csv").write_text("name,age\nAda,36\n")
    make_pdf(root / "e.pdf", [["Page one text."], ["Page two text."]])
    make_docx(root / "f.docx")
    make_xlsx(root / "g.xlsx")
    make_eml(root / "h.eml")
    make_scanned_pdf(root / "scan.pdf")
    Image.new("L", (64, 32), 255).save(root / "photo.jpg")
    (root / "fake.png").write_bytes(b"\x89PNG\r\n\x1a\n not really a png")
    make_broken(root / "broken.docx")
    (root / "archive.bin").write_bytes(b"\x00\x01")
    return root


def test_every_format_is_ingested_and_failures_are_named(
    mixed: Path, store: DocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = recording_writes(monkeypatch)
    report = ingest_path(mixed, collection="mix", embedder=HashEmbedder(), store=store)
    ingested = ["a.md", "b.rst.txt", "c.html", "d.csv", "e.pdf", "f.docx", "g.xlsx", "h.eml"]
    assert store.sources("mix") == [*ingested, "h.eml#figures.rst"]  # an attachment: its own
    assert report.files == len(ingested) and report.attachments == [("h.eml#figures.rst", "h.eml")]
    failures = dict(report.failures)
    assert set(failures) == {"scan.pdf", "photo.jpg", "fake.png", "broken.docx", "h.eml#chart.png"}
    needs = "no text layer: needs OCR ({}; tesseract-ocr is not installed)"
    assert failures["scan.pdf"] == needs.format("2 page(s) without text")
    assert failures["photo.jpg"] == needs.format("an image")
    assert (
        failures["fake.png"] == "cannot parse as png: not a PNG, JPEG, GIF, BMP, TIFF or WebP image"
    )
    assert failures["broken.docx"].startswith("cannot parse as docx: ")
    assert report.skipped == ["archive.bin"]
    kinds = {source: {c.kind for c in chunks} for source, chunks in given.items()}
    assert kinds == {
        "a.md": {"md"},
        "b.rst.txt": {"rst"},
        "c.html": {"html"},
        "d.csv": {"csv"},
        "e.pdf": {"pdf"},
        "f.docx": {"docx"},
        "g.xlsx": {"xlsx"},
        "h.eml": {"eml"},
        "h.eml#figures.rst": {"rst"},
    }
    assert [c.page for c in given["e.pdf"]] == [1, 2]
    docx = "\n".join(c.text for c in given["f.docx"])
    assert "\n\nHotels\nA hotel night costs" in docx  # a sub-section's heading, inline
    assert given["d.csv"][0].text == "name: Ada; age: 36"


def test_duplicate_chunks_are_stored_once(
    mixed: Path, store: DocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = recording_writes(monkeypatch)
    # z.md is a.md once normalised (case, spaces): each of its chunks is one of a.md's.
    (mixed / "z.md").write_text(f"# LISTS\n\nA  LIST HOLDS ITEMS IN ORDER.\n\n{FOOTER.upper()}\n")
    report = ingest_path(
        mixed,
        collection="mix",
        embedder=HashEmbedder(),
        store=store,
        chunk_tokens=16,
        overlap_tokens=0,
    )
    texts = [c.text for chunks in given.values() for c in chunks]
    assert len(given["a.md"]) > 1
    for chunk in given["a.md"]:
        assert texts.count(chunk.text) == 1
    assert "z.md" not in given
    assert report.duplicates >= len(given["a.md"])  # and any chunk of b.rst.txt that a.md has
    assert ("z.md", "no text to index: every chunk is a duplicate") in report.failures
    assert [c.ordinal for c in given["b.rst.txt"]] == list(range(len(given["b.rst.txt"])))


def test_progress_counts_files_chunks_and_time_left(mixed: Path, store: DocumentStore) -> None:
    seen: list[IngestProgress] = []
    report = ingest_path(
        mixed, collection="mix", embedder=HashEmbedder(), store=store, on_progress=seen.append
    )
    total = len(list(mixed.iterdir()))
    assert [p.files_done for p in seen] == sorted(p.files_done for p in seen)
    assert {p.files_total for p in seen} == {total}
    # One call per file (ingested, failed or skipped) and one per embedded batch.
    assert sorted({p.files_done for p in seen}) == list(range(1, total + 1))
    assert seen[-1].files_done == total and seen[-1].chunks == report.chunks
    assert (
        seen[-1].bytes_done
        == seen[-1].bytes_total
        == sum(f.stat().st_size for f in mixed.iterdir())
    )
    assert seen[-1].eta_s == 0.0
    assert seen[-1].chunks_per_s > 0
    chunks = [p.chunks for p in seen]
    assert chunks == sorted(chunks)


def test_eta_is_unknown_before_any_byte() -> None:
    start = IngestProgress(0, 3, 0, 0.0, 0, 300)
    assert start.eta_s is None and start.chunks_per_s == 0.0
    half = IngestProgress(1, 3, 20, 2.0, 100, 300)
    assert half.eta_s == pytest.approx(4.0) and half.chunks_per_s == pytest.approx(10.0)


class _CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.batches.append(list(texts))
        return super().embed(texts)


def test_embedding_in_length_batches_keeps_the_order() -> None:
    texts = [f"{'word ' * (i * 7 % 23)} item{i}" for i in range(70)]
    embedder = _CountingEmbedder()
    embedder.batch_size = 16
    vectors = embed_by_length(embedder, texts)
    assert np.allclose(vectors, HashEmbedder().embed(texts))
    assert [len(b) for b in embedder.batches] == [16, 16, 16, 16, 6]
    lengths = [[len(t) for t in batch] for batch in embedder.batches]
    assert all(max(a) <= min(b) for a, b in itertools.pairwise(lengths))
    assert embed_by_length(embedder, []).shape == (0, 256)


def test_chunks_of_several_files_are_embedded_together(
    tmp_path: Path, store: DocumentStore
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(6):
        (docs / f"doc{i}.md").write_text(f"# Doc {i}\n\nShort text number {i}.\n")
    embedder = _CountingEmbedder()
    report = ingest_path(docs, collection="c", embedder=embedder, store=store)
    assert report.files == 6
    # One batch of the 6 chunks, then one of their 6 sentences (kept for attribution).
    assert [len(batch) for batch in embedder.batches] == [6, 6]
    assert all("Doc" in text for text in embedder.batches[0])


def test_bad_chunk_sizes_are_refused_before_anything_is_stored(
    mixed: Path, store: DocumentStore
) -> None:
    with pytest.raises(ValueError, match="overlap_tokens"):
        ingest_path(
            mixed,
            collection="c",
            embedder=HashEmbedder(),
            store=store,
            chunk_tokens=32,
            overlap_tokens=32,
        )
    assert store.collections() == {}


def test_a_long_file_shows_progress_per_embedded_batch(
    tmp_path: Path, store: DocumentStore
) -> None:
    paragraphs = [f"Paragraph {i} talks about topic number {i} at length." for i in range(90)]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "long.md").write_text("# Long\n\n" + "\n\n".join(paragraphs))
    embedder = HashEmbedder()
    embedder.batch_size = 4
    seen: list[IngestProgress] = []
    report = ingest_path(
        docs,
        collection="c",
        embedder=embedder,
        store=store,
        chunk_tokens=16,
        overlap_tokens=0,
        on_progress=seen.append,
    )
    before_the_file = [p.chunks for p in seen if p.files_done == 0]
    assert before_the_file == [*range(4, report.chunks, 4), report.chunks]
    assert seen[-1].files_done == 1 and seen[-1].chunks == report.chunks
