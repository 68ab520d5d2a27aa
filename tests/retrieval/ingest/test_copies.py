"""A byte-identical copy of a file is recorded as its copy (issue 23 §3): no failure, no chunks
of its own, searchable under both names; it outlives its original, and a copy that changes is a
file of its own again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval import DocumentStore, SearchFilter, ingest_path
from retrieval.ingest.report import IngestReport
from retrieval.store.layout import Manifest
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.carried_documents import make_thread

TEA = "# Tea\n\nGreen tea steeps for two minutes at eighty degrees.\n"
COFFEE = "# Coffee\n\nAn espresso is pulled in twenty five seconds.\n"


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "copies").mkdir(parents=True)
    (folder / "tea.md").write_text(TEA)
    (folder / "copies" / "tea.md").write_text(TEA)
    (folder / "coffee.md").write_text(COFFEE)
    return folder


def _ingest(folder: Path, store: DocumentStore) -> IngestReport:
    return ingest_path(folder, collection="docs", embedder=HashEmbedder(), store=store)


def _hit(store: DocumentStore, prefix: str = "", query: str = "green tea steeps") -> tuple:
    [hit] = store.search("docs", HashEmbedder().embed([query])[0], 1, SearchFilter(prefix))
    return hit.source, hit.also


def _record(store: DocumentStore, source: str) -> tuple[int, str]:
    snapshot = store.snapshot("docs")
    assert snapshot is not None
    record = snapshot.manifest.files[source]
    return record.chunks, record.duplicate_of


def test_a_copy_is_recorded_searchable_under_both_names(docs: Path, store: DocumentStore) -> None:
    report = _ingest(docs, store)
    assert report.copies == [("tea.md", "copies/tea.md")]  # the first one walked is the original
    assert not report.failures and report.files == 2
    assert store.sources("docs") == ["coffee.md", "copies/tea.md", "tea.md"]
    assert _record(store, "tea.md") == (0, "copies/tea.md")
    assert _hit(store) == ("copies/tea.md", ("tea.md",))  # one hit, both names
    assert _hit(store, prefix="tea.md") == ("tea.md", ("copies/tea.md",))
    assert _hit(store, prefix="copies/") == ("copies/tea.md", ("tea.md",))
    assert _hit(store, prefix="coffee") == ("coffee.md", ())  # the filter still filters
    again = _ingest(docs, store)
    assert again.unchanged == ["coffee.md", "copies/tea.md", "tea.md"] and again.snapshot is None


def test_a_copy_outlives_its_original(docs: Path, store: DocumentStore) -> None:
    _ingest(docs, store)
    (docs / "copies" / "tea.md").unlink()
    report = _ingest(docs, store)
    assert report.removed == ["copies/tea.md"] and report.files == 0
    assert store.sources("docs") == ["coffee.md", "tea.md"]
    assert _record(store, "tea.md")[0] >= 1 and _record(store, "tea.md")[1] == ""
    assert _hit(store) == ("tea.md", ())
    assert _hit(store, prefix="tea.md") == ("tea.md", ())


def test_the_first_copy_takes_over_and_the_others_copy_it(docs: Path, store: DocumentStore) -> None:
    (docs / "zz.md").write_text(TEA)
    assert sorted(_ingest(docs, store).copies) == [
        ("tea.md", "copies/tea.md"),
        ("zz.md", "copies/tea.md"),
    ]
    assert _hit(store) == ("copies/tea.md", ("tea.md", "zz.md"))
    (docs / "copies" / "tea.md").unlink()
    _ingest(docs, store)
    assert _record(store, "tea.md")[1] == "" and _record(store, "zz.md") == (0, "tea.md")
    assert _hit(store) == ("tea.md", ("zz.md",))
    assert _hit(store, prefix="zz") == ("zz.md", ("tea.md",))


def test_a_copy_keeps_the_text_its_original_changes_away_from(
    docs: Path, store: DocumentStore
) -> None:
    _ingest(docs, store)
    (docs / "copies" / "tea.md").write_text("# Tea\n\nBlack tea steeps for four minutes.\n")
    report = _ingest(docs, store)
    assert report.changed == ["copies/tea.md"] and report.unchanged == ["coffee.md", "tea.md"]
    assert _hit(store) == ("tea.md", ())  # the old text, under the copy's name alone
    assert _hit(store, query="black tea four minutes") == ("copies/tea.md", ())


def test_a_copy_that_changes_is_a_file_of_its_own(docs: Path, store: DocumentStore) -> None:
    _ingest(docs, store)
    (docs / "tea.md").write_text("# Tea\n\nMint tea needs no timer at all.\n")
    report = _ingest(docs, store)
    assert report.changed == ["tea.md"] and not report.copies
    assert _record(store, "tea.md")[1] == "" and _hit(store) == ("copies/tea.md", ())
    # and the same bytes again: a copy once more
    (docs / "tea.md").write_text(TEA)
    assert _ingest(docs, store).copies == [("tea.md", "copies/tea.md")]


@pytest.mark.process
def test_copies_of_a_file_already_stored_and_of_an_attachment(
    docs: Path, store: DocumentStore, tmp_path: Path
) -> None:
    _ingest(docs, store)
    later = tmp_path / "later"
    later.mkdir()
    (later / "tea-again.md").write_text(TEA)
    make_thread(later / "forward.eml")  # the same message saved twice: its attachments too
    (later / "thread.eml").write_bytes((later / "forward.eml").read_bytes())
    report = ingest_path(later, collection="docs", embedder=HashEmbedder(), store=store)
    copies = dict(report.copies)
    assert copies["tea-again.md"] == "copies/tea.md"
    assert copies["thread.eml"] == "forward.eml"
    assert copies["thread.eml#report.pdf"] == "forward.eml#report.pdf"
    # Removing the folder's original message leaves the copy and its attachments searchable.
    (later / "forward.eml").unlink()
    ingest_path(later, collection="docs", embedder=HashEmbedder(), store=store)
    assert "thread.eml#report.pdf" in store.sources("docs")
    assert _record(store, "thread.eml#report.pdf")[1] == ""
    [hit] = store.search(
        "docs", HashEmbedder().embed(["turbine corrosion blade"])[0], 1, SearchFilter("thread")
    )
    assert (hit.source, hit.message) == ("thread.eml#report.pdf", "thread.eml")


def test_a_copy_of_another_type_is_no_copy(docs: Path, store: DocumentStore) -> None:
    """The same bytes read by another parser are another document."""
    (docs / "tea.txt").write_text(TEA)
    report = _ingest(docs, store)
    assert all("tea.txt" not in pair for pair in report.copies)


def test_manifests_written_before_copies_are_read() -> None:
    manifest = Manifest.from_json(
        json.dumps(
            {
                "collection": "docs",
                "version": "v000001",
                "created_at": "2026-12-01T00:00:00+00:00",
                "embedding_backend": "onnx",
                "embedding_model": "m",
                "dim": 4,
                "chunks": 1,
                "next_id": 2,
                "index": {"kind": "flat", "params": {}, "reason": "small"},
                "build_s": 0.1,
                "files": {"a.md": {"sha256": "ab" * 32, "chunks": 1, "root": ""}},
                "format": 1,
            }
        )
    )
    assert manifest.files["a.md"].duplicate_of == "" and manifest.files["a.md"].message == ""
