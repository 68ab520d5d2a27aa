"""Ingest into a real store with the real MiniLM: failures reported, re-ingest idempotent.

Since the format parsers, a PDF is read (a broken one is a failure, not a skipped file) and
sections are named by their path below the title."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import faiss
import pytest

from retrieval import DocumentStore, Embedder, ParseLimits, ingest_path, iter_documents
from retrieval.formats.document import first_section

pytestmark = pytest.mark.slow

TUTORIAL_SUBSET = (
    "tutorial/controlflow.rst.txt",
    "tutorial/datastructures.rst.txt",
    "tutorial/errors.rst.txt",
)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "guide").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "lists.md").write_text("# Lists\n\nA list holds items in order.\n")
    (root / "guide" / "loops.rst.txt").write_text("Loops\n=====\n\nA for loop walks a list.\n")
    (root / "notes.txt").write_text("Plain notes about dictionaries and keys.\n")
    (root / "bad.txt").write_bytes(b"\xff\xfe\x00 not utf-8 \xc3\x28")
    (root / "empty.md").write_text("\n\n")
    (root / "slides.pdf").write_bytes(b"%PDF-1.7")  # a PDF cut short: cannot be parsed
    (root / "archive.bin").write_bytes(b"\x00\x01")
    (root / ".hidden.md").write_text("# Hidden\n\nNot ingested.\n")
    (root / ".git" / "config.txt").write_text("not ingested either\n")
    return root


def test_iter_documents(docs: Path) -> None:
    names = [p.relative_to(docs).as_posix() for p in iter_documents(docs)]
    assert names == [
        "bad.txt",
        "empty.md",
        "guide/loops.rst.txt",
        "lists.md",
        "notes.txt",
        "slides.pdf",
    ]
    assert list(iter_documents(docs / "lists.md")) == [docs / "lists.md"]


def test_ingest_reports_failures_and_goes_on(
    docs: Path, store: DocumentStore, embedder: Embedder
) -> None:
    seen: list[str] = []
    report = ingest_path(
        docs, collection="notes", embedder=embedder, store=store, progress=seen.append
    )
    assert report.files == 3 and report.chunks == 3
    failures = dict(report.failures)
    assert set(failures) == {"bad.txt", "empty.md", "slides.pdf"}
    assert "UTF-8" in failures["bad.txt"] and "no text" in failures["empty.md"]
    assert failures["slides.pdf"].startswith("cannot parse as pdf: ")
    assert report.skipped == ["archive.bin"]
    assert len(seen) == 3 and seen[0].startswith("guide/loops.rst.txt")
    assert store.sources("notes") == ["guide/loops.rst.txt", "lists.md", "notes.txt"]
    [hit] = store.search("notes", embedder.embed(["What does a for loop do?"])[0], 1)
    assert (hit.source, hit.title, hit.section) == ("guide/loops.rst.txt", "Loops", "Loops")

    again = ingest_path(docs, collection="notes", embedder=embedder, store=store)
    assert (again.files, again.chunks, again.failures, again.skipped) == (
        0,  # nothing changed: nothing embedded, no snapshot published
        0,
        report.failures,
        report.skipped,
    )
    assert len(again.unchanged) == 3 and again.snapshot is None
    assert store.collections() == {"notes": 3}
    snapshot = store.snapshot("notes")
    assert snapshot is not None and snapshot.version == "v000001"
    index = faiss.read_index(str(snapshot.path / "index.faiss"))
    assert index.ntotal == 3


def test_a_single_file_is_named_by_its_file_name(
    docs: Path, store: DocumentStore, embedder: Embedder
) -> None:
    report = ingest_path(
        docs / "guide" / "loops.rst.txt", collection="one", embedder=embedder, store=store
    )
    assert (report.files, report.failures) == (1, [])
    assert store.sources("one") == ["loops.rst.txt"]


def test_a_file_over_a_limit_is_reported_and_the_others_ingested(
    docs: Path, store: DocumentStore, embedder: Embedder
) -> None:
    """``ragtime ingest`` keeps to the per-file limits: one over is a failure naming it."""
    (docs / "long.md").write_text("\n\n".join(f"# Part {i}\n\n" + "word " * 300 for i in range(6)))
    report = ingest_path(
        docs, collection="bounded", embedder=embedder, store=store, limits=ParseLimits(max_chunks=4)
    )
    failures = dict(report.failures)
    assert "more than the limit of 4 chunks (max_chunks)" in failures["long.md"]
    assert "long.md" not in store.sources("bounded") and "lists.md" in store.sources("bounded")


def test_a_missing_path_is_an_error(
    tmp_path: Path, store: DocumentStore, embedder: Embedder
) -> None:
    with pytest.raises(FileNotFoundError):
        ingest_path(tmp_path / "missing", collection="x", embedder=embedder, store=store)


def test_demo_tutorial_answers_a_question(
    tmp_path: Path, demo_corpus: Path, store: DocumentStore, embedder: Embedder
) -> None:
    corpus = tmp_path / "corpus"
    for name in TUTORIAL_SUBSET:
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(demo_corpus / name, corpus / name)
    started = time.perf_counter()
    report = ingest_path(corpus, collection="demo", embedder=embedder, store=store)
    elapsed = time.perf_counter() - started
    assert report.files == len(TUTORIAL_SUBSET) and not report.failures
    print(f"\ningested {report.chunks} chunks in {elapsed:.2f} s: {report.chunks / elapsed:.0f}/s")

    question = "How do I define a function with default argument values?"
    hits = store.search("demo", embedder.embed([question])[0], 3)
    assert "tutorial/controlflow.rst.txt" in [h.source for h in hits]
    # A chunk is named by each section it holds text of, the one it starts in first.
    starts = [first_section(h.section) for h in hits]
    assert "More on Defining Functions > Default Argument Values" in starts
