"""Incremental ingest: only files whose content hash changed are embedded; unchanged ones keep
their stored vectors; files gone from the folder lose their chunks; all in one snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from retrieval import DocumentStore, NothingToIngest, ingest_path
from retrieval.ingest import folder as ingest_folder
from tests.fakes.hash_embedder import CountingEmbedder, HashEmbedder


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    _write(
        folder,
        {
            "lists.md": "# Lists\n\nA list holds items in order.\n",
            "dicts.md": "# Dicts\n\nA dict maps keys to values.\n",
            "guide/loops.rst": "Loops\n=====\n\nA for loop walks a sequence.\n",
        },
    )
    return folder


def _manifest(store: DocumentStore, collection: str) -> dict[str, object]:
    snapshot = store.snapshot(collection)
    assert snapshot is not None
    return dict(json.loads((snapshot.path / "manifest.json").read_text()))


def test_reingesting_embeds_only_what_changed(store: DocumentStore, docs: Path) -> None:
    embedder = CountingEmbedder()
    first = ingest_path(docs, collection="notes", embedder=embedder, store=store)
    assert sorted(first.added) == ["dicts.md", "guide/loops.rst", "lists.md"]
    chunk_texts = [t for t in embedder.texts if "\n" in t]  # a chunk's input: title, text
    assert first.snapshot == "v000001" and len(chunk_texts) == 3
    assert len(embedder.texts) == 6  # and their sentences, kept for attribution
    before = store.snapshot("notes")
    assert before is not None
    kept_ids = {p.source: p.id for p in store.get(list(map(int, before.ids)))}

    (docs / "lists.md").write_text("# Lists\n\nA list holds items, and grows with append.\n")
    (docs / "dicts.md").unlink()
    _write(docs, {"sets.md": "# Sets\n\nA set holds unique items.\n"})
    embedder.texts.clear()
    second = ingest_path(docs, collection="notes", embedder=embedder, store=store)

    assert (second.added, second.changed, second.removed) == (
        ["sets.md"],
        ["lists.md"],
        ["dicts.md"],
    )
    assert second.unchanged == ["guide/loops.rst"]
    assert second.summary() == "1 added, 1 changed, 1 unchanged, 1 removed"
    embedded = sorted(t.split("\n")[0] for t in embedder.texts if "\n" in t)
    assert embedded == ["Lists", "Sets"]  # not loops
    assert not any("loop" in t for t in embedder.texts)  # nor its sentences
    assert second.snapshot == "v000002"
    assert store.sources("notes") == ["guide/loops.rst", "lists.md", "sets.md"]
    after = {p.source: p for p in store.get(list(range(1, 20)))}
    assert after["guide/loops.rst"].id == kept_ids["guide/loops.rst"]  # carried over, same id
    assert "append" in after["lists.md"].text and after["lists.md"].id != kept_ids["lists.md"]
    # The carried vector is the one embedded before: it still finds its chunk first.
    vector = HashEmbedder().embed(["Loops\nA for loop walks a sequence."])[0]
    assert store.search("notes", vector, 1)[0].source == "guide/loops.rst"
    files = _manifest(store, "notes")["files"]
    assert isinstance(files, dict) and sorted(files) == ["guide/loops.rst", "lists.md", "sets.md"]


def test_nothing_changed_publishes_nothing(store: DocumentStore, docs: Path) -> None:
    embedder = CountingEmbedder()
    ingest_path(docs, collection="notes", embedder=embedder, store=store)
    embedder.texts.clear()
    again = ingest_path(docs, collection="notes", embedder=embedder, store=store)
    assert again.snapshot is None and embedder.texts == []
    assert sorted(again.unchanged) == ["dicts.md", "guide/loops.rst", "lists.md"]
    snapshot = store.snapshot("notes")
    assert snapshot is not None and snapshot.version == "v000001"


def test_folders_ingested_into_one_collection_do_not_remove_each_other(
    store: DocumentStore, docs: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    _write(other, {"faq.md": "# FAQ\n\nAnswers to questions.\n"})
    ingest_path(docs, collection="notes", embedder=HashEmbedder(), store=store)
    report = ingest_path(other, collection="notes", embedder=HashEmbedder(), store=store)
    assert report.removed == [] and report.added == ["faq.md"]
    assert len(store.sources("notes")) == 4
    (other / "faq.md").unlink()
    (other / "new.md").write_text("# New\n\nFresh text.\n")
    report = ingest_path(other, collection="notes", embedder=HashEmbedder(), store=store)
    assert report.removed == ["faq.md"]
    assert store.sources("notes") == ["dicts.md", "guide/loops.rst", "lists.md", "new.md"]


def test_a_file_that_fails_keeps_its_previous_chunks(store: DocumentStore, docs: Path) -> None:
    ingest_path(docs, collection="notes", embedder=HashEmbedder(), store=store)
    (docs / "dicts.md").write_bytes(b"\xff\xfe not utf-8 \xc3\x28")
    report = ingest_path(docs, collection="notes", embedder=HashEmbedder(), store=store)
    assert [source for source, _ in report.failures] == ["dicts.md"]
    assert report.removed == [] and "dicts.md" in store.sources("notes")


def test_rebuild_embeds_everything_again(store: DocumentStore, docs: Path) -> None:
    ingest_path(docs, collection="notes", embedder=HashEmbedder(), store=store)
    embedder = CountingEmbedder()
    report = ingest_path(docs, collection="notes", embedder=embedder, store=store, rebuild=True)
    assert len(report.added) == 3 and report.unchanged == []
    assert len(embedder.texts) == 6  # 3 chunks and their 3 sentences


def test_an_error_mid_ingest_publishes_nothing(
    store: DocumentStore, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest_path(docs, collection="notes", embedder=HashEmbedder(), store=store)
    (docs / "lists.md").write_text("# Lists\n\nChanged.\n")
    (docs / "dicts.md").write_text("# Dicts\n\nChanged too.\n")
    embedder = HashEmbedder()
    calls: list[int] = []

    def embed_then_fail(texts: object) -> np.ndarray:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("the embedder broke")
        return HashEmbedder().embed(list(texts))  # type: ignore[call-overload]

    monkeypatch.setattr(embedder, "embed", embed_then_fail)
    monkeypatch.setattr(ingest_folder, "EMBED_GATHER", 1)  # each file embedded, then staged, alone
    with pytest.raises(RuntimeError, match="broke"):
        ingest_path(docs, collection="notes", embedder=embedder, store=store)
    snapshot = store.snapshot("notes")
    assert snapshot is not None and snapshot.version == "v000001"
    assert [p.name for p in (snapshot.path.parent).iterdir()] == ["v000001"]  # no leftovers


def test_a_folder_with_nothing_to_ingest_is_refused_and_writes_nothing(
    store: DocumentStore, docs: Path, tmp_path: Path
) -> None:
    """Issue 43 §4: an empty folder made a collection the server then called unknown. An
    emptied folder (an unmounted share looks the same) does not remove what it held."""
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NothingToIngest, match="holds no files: nothing to ingest"):
        ingest_path(empty, collection="fresh", embedder=HashEmbedder(), store=store)
    assert store.collections() == {} and not (store.root / "collections" / "fresh").exists()
    ingest_path(docs, collection="notes", embedder=HashEmbedder(), store=store)
    for file in [*docs.rglob("*.md"), *docs.rglob("*.rst")]:
        file.rename(file.with_suffix(".bak"))
    with pytest.raises(NothingToIngest, match=r"holds 3 file\(s\), none of a format .*\.md"):
        ingest_path(docs, collection="notes", embedder=HashEmbedder(), store=store)
    assert len(store.sources("notes")) == 3
    snapshot = store.snapshot("notes")
    assert snapshot is not None and snapshot.version == "v000001"
