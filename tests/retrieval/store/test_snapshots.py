"""Snapshots on disk: the layout and manifest, atomic publishing, pruning, searches that keep
the snapshot they started on, pickup of snapshots published by another store object."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from retrieval import Chunk, DocumentStore, IndexSettings
from retrieval.store.snapshot import Snapshot

DIM = 8


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _chunks(source: str, n: int, tag: str = "v1") -> list[Chunk]:
    return [
        Chunk(source, "Doc", "", i, f"{tag} chunk {i} of {source}", page=i + 1, kind="pdf")
        for i in range(n)
    ]


def test_layout_and_manifest(tmp_path: Path) -> None:
    store = DocumentStore(tmp_path, embedding_backend="onnx", embedding_model="mini", keep=2)
    store.open()
    rng = np.random.default_rng(0)
    with store.writer("docs") as writer:
        writer.replace_source("a.pdf", _chunks("a.pdf", 3), _unit(rng, 3), sha256="ab" * 32)
        writer.replace_source("b.md", [Chunk("b.md", "B", "", 0, "text")], _unit(rng, 1))
    folder = tmp_path / "collections" / "docs"
    assert (folder / "CURRENT").read_text() == "v000001\n"
    snapshot_dir = folder / "snapshots" / "v000001"
    assert sorted(p.name for p in snapshot_dir.iterdir()) == [
        "bm25",
        "chunks.sqlite3",
        "ids.npy",
        "index.faiss",
        "manifest.json",
        "vectors.npy",
    ]
    manifest = json.loads((snapshot_dir / "manifest.json").read_text())
    assert manifest["embedding_backend"] == "onnx" and manifest["embedding_model"] == "mini"
    assert (manifest["chunks"], manifest["dim"], manifest["next_id"]) == (4, DIM, 5)
    assert manifest["index"]["kind"] == "flat" and "threshold" in manifest["index"]["reason"]
    assert manifest["kinds"] == {"pdf": 3, "md": 1}  # "md" from the suffix: no kind given
    assert manifest["files"]["a.pdf"] == {"sha256": "ab" * 32, "chunks": 3, "root": ""}
    hits = store.search("docs", _unit(rng, 1)[0], 10)
    assert {(h.source, h.page, h.kind) for h in hits} >= {("a.pdf", 2, "pdf"), ("b.md", None, "md")}
    store.close()


def test_old_snapshots_are_pruned_to_keep(tmp_path: Path) -> None:
    store = DocumentStore(tmp_path, keep=2)
    store.open()
    rng = np.random.default_rng(1)
    for round_ in range(4):
        store.replace_source("docs", "a.md", _chunks("a.md", 2, f"r{round_}"), _unit(rng, 2))
    folder = tmp_path / "collections" / "docs" / "snapshots"
    assert sorted(p.name for p in folder.iterdir()) == ["v000003", "v000004"]
    store.close()


def test_a_search_in_flight_finishes_on_its_snapshot(tmp_path: Path) -> None:
    """A swapped-out snapshot, even pruned from disk, answers whoever still holds it."""
    store = DocumentStore(tmp_path, keep=1)
    store.open()
    rng = np.random.default_rng(2)
    vectors = _unit(rng, 3)
    store.replace_source("docs", "a.md", _chunks("a.md", 3, "old"), vectors)
    held = store.snapshot("docs")
    assert held is not None
    store.replace_source("docs", "a.md", _chunks("a.md", 3, "new"), _unit(rng, 3))
    assert not held.path.exists()  # pruned (keep=1)
    hits, _ = held.search(vectors[:1], 3)
    rows = held.rows(i for i, _ in hits)
    assert all(rows[i][4].startswith("old ") for i, _ in hits)
    assert all(p.text.startswith("new ") for p in store.search("docs", vectors[0], 3))
    store.close()


def test_another_store_picks_up_a_published_snapshot(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    writer_store, reader = DocumentStore(tmp_path), DocumentStore(tmp_path)
    writer_store.open()
    writer_store.replace_source("docs", "a.md", _chunks("a.md", 2, "old"), _unit(rng, 2))
    reader.open()
    assert reader.refresh() == []  # nothing new: one stat per collection
    writer_store.replace_source("docs", "a.md", _chunks("a.md", 2, "new"), _unit(rng, 2))
    writer_store.replace_source("faq", "q.md", _chunks("q.md", 1), _unit(rng, 1))
    assert reader.collections() == {"docs": 2}  # not yet looked
    assert reader.refresh() == ["docs", "faq"]
    assert reader.collections() == {"docs": 2, "faq": 1}
    assert all(p.text.startswith("new ") for p in reader.search("docs", _unit(rng, 1)[0], 2))
    writer_store.drop_collection("faq")
    assert reader.refresh() == ["faq"] and not reader.has_collection("faq")
    writer_store.close()
    reader.close()


def test_the_watcher_swaps_without_being_asked(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    writer_store, reader = DocumentStore(tmp_path), DocumentStore(tmp_path)
    writer_store.open()
    writer_store.replace_source("docs", "a.md", _chunks("a.md", 2, "old"), _unit(rng, 2))
    reader.open()
    reader.watch(0.05)
    swapped = threading.Event()
    writer_store.replace_source("docs", "a.md", _chunks("a.md", 2, "new"), _unit(rng, 2))
    for _ in range(200):
        snapshot = reader.snapshot("docs")
        if snapshot is not None and snapshot.version == "v000002":
            swapped.set()
            break
        swapped.wait(0.05)
    assert swapped.is_set()
    reader.close()  # stops the watcher
    writer_store.close()


def test_a_broken_new_snapshot_keeps_the_old_one_served(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    writer_store, reader = DocumentStore(tmp_path), DocumentStore(tmp_path)
    writer_store.open()
    writer_store.replace_source("docs", "a.md", _chunks("a.md", 2, "old"), _unit(rng, 2))
    reader.open()
    writer_store.replace_source("docs", "a.md", _chunks("a.md", 2, "new"), _unit(rng, 2))
    snapshot = writer_store.snapshot("docs")
    assert snapshot is not None
    index_bytes = (snapshot.path / "index.faiss").read_bytes()
    (snapshot.path / "index.faiss").write_bytes(b"torn")
    assert reader.refresh() == [] and reader.refresh() == []  # tried again, still the old one
    assert reader.problems() == {}
    assert all(p.text.startswith("old ") for p in reader.search("docs", _unit(rng, 1)[0], 2))
    (snapshot.path / "index.faiss").write_bytes(index_bytes)  # as if it had been rewritten
    assert reader.refresh() == ["docs"]
    assert all(p.text.startswith("new ") for p in reader.search("docs", _unit(rng, 1)[0], 2))
    writer_store.close()
    reader.close()


def test_a_corrupt_pointer_is_reported_not_served(tmp_path: Path) -> None:
    store = DocumentStore(tmp_path)
    store.open()
    store.replace_source("docs", "a.md", _chunks("a.md", 1), _unit(np.random.default_rng(6), 1))
    store.close()
    (tmp_path / "collections" / "docs" / "CURRENT").write_text("../../etc\n")
    store.open()
    assert "not a snapshot version" in store.problems()["docs"]
    store.close()


def test_a_snapshot_with_a_missing_file_does_not_load(tmp_path: Path) -> None:
    store = DocumentStore(tmp_path)
    store.open()
    store.replace_source("docs", "a.md", _chunks("a.md", 1), _unit(np.random.default_rng(7), 1))
    snapshot = store.snapshot("docs")
    assert snapshot is not None
    (snapshot.path / "vectors.npy").unlink()
    with pytest.raises(Exception, match="cannot read snapshot"):
        Snapshot.load(snapshot.path)
    store.close()


def test_the_index_follows_the_collection_size(tmp_path: Path) -> None:
    store = DocumentStore(tmp_path, index_settings=IndexSettings(threshold=50, hnsw_m=8))
    store.open()
    rng = np.random.default_rng(8)
    store.replace_source("small", "a.md", _chunks("a.md", 10), _unit(rng, 10))
    store.replace_source("large", "a.md", _chunks("a.md", 60), _unit(rng, 60))
    _, small = store.search_with_info("small", _unit(rng, 1)[0], 3)
    hits, large = store.search_with_info("large", _unit(rng, 1)[0], 3)
    assert small.index.kind == "flat" and large.index.kind == "hnsw" and len(hits) == 3
    assert large.attributes()["ragtime.index.efSearch"] == 128
    assert large.attributes()["ragtime.index.M"] == 8
    assert str(large.attributes()["ragtime.index.device"]).startswith("cpu: ")
    store.close()
