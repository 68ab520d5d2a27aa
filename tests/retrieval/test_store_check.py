"""``DocumentStore.check``: a collection whose index cannot be loaded is named, with why, and a
search of it fails as ``BrokenIndex`` (503), not as a 500. The index files are found by their
suffix under the store's root, whatever layout the store keeps them in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval import BrokenIndex, Chunk, DocumentStore

DIM = 8


def _store_with(root: Path, *collections: str) -> None:
    rng = np.random.default_rng(3)
    store = DocumentStore(root)
    store.open()
    for name in collections:
        vectors = rng.normal(size=(3, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        chunks = [Chunk("a.rst", "Doc", f"Part {i}", i, f"{name} chunk {i}") for i in range(3)]
        store.replace_source(name, "a.rst", chunks, vectors)
    store.close()


def index_files(root: Path, collection: str) -> list[Path]:
    """The index files the store holds for ``collection`` (``<collection>.faiss``, anywhere)."""
    files = [p for p in root.rglob(f"{collection}.faiss") if p.is_file()]
    assert files, f"no index file for {collection!r} under {root}"
    return files


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_truncated_index_is_reported_and_refused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _store_with(root, "docs", "faq")
    for path in index_files(root, "docs"):
        truncate(path)
    store = DocumentStore(root)
    store.open()
    try:
        problems = store.check()
        assert list(problems) == ["docs"]
        assert "cannot be read" in problems["docs"] and "docs.faiss" in problems["docs"]
        with pytest.raises(BrokenIndex, match="re-ingest") as caught:
            store.search("docs", np.ones(DIM, dtype=np.float32), 2)
        assert caught.value.status_code == 503
        assert len(store.search("faq", np.ones(DIM, dtype=np.float32), 2)) == 2
    finally:
        store.close()


def test_a_missing_index_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _store_with(root, "docs")
    for path in index_files(root, "docs"):
        path.unlink()
    store = DocumentStore(root)
    store.open()
    try:
        assert "no index file" in store.check()["docs"]
    finally:
        store.close()


def test_a_sound_store_has_no_problems(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _store_with(root, "docs")
    store = DocumentStore(root)
    store.open()
    try:
        assert store.check() == {}
    finally:
        store.close()
