"""``DocumentStore.check``: a collection whose index cannot be loaded is named, with why, and a
search of it fails as ``BrokenIndex`` (503), not as a 500. The index files are found by their
suffix under the collection's folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval import BrokenIndex, Chunk, DocumentStore
from retrieval.store.layout import MANIFEST, file_checksum

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
    """The index files the store holds for ``collection`` (each snapshot's ``index.faiss``)."""
    files = [p for p in root.rglob("*.faiss") if p.is_file() and collection in p.parts]
    assert files, f"no index file for {collection!r} under {root}"
    return files


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def assert_docs_broken_faq_served(root: Path) -> None:
    """``docs``'s index is named broken for its checksum, its search refused with a 503; ``faq``
    is still searched."""
    store = DocumentStore(root)
    store.open()
    try:
        problems = store.check()
        assert list(problems) == ["docs"]
        assert "index.faiss does not match its checksum" in problems["docs"]
        with pytest.raises(BrokenIndex, match="re-ingest") as caught:
            store.search("docs", np.ones(DIM, dtype=np.float32), 2)
        assert caught.value.status_code == 503
        assert len(store.search("faq", np.ones(DIM, dtype=np.float32), 2)) == 2
    finally:
        store.close()


def test_a_truncated_index_is_reported_and_refused(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _store_with(root, "docs", "faq")
    for path in index_files(root, "docs"):
        truncate(path)
    assert_docs_broken_faq_served(root)


def test_a_missing_index_is_reported(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _store_with(root, "docs")
    for path in index_files(root, "docs"):
        path.unlink()
    store = DocumentStore(root)
    store.open()
    try:
        assert "No such file" in store.check()["docs"]
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


def flip_bytes(path: Path) -> None:
    """Flip every bit of a run of bytes in the middle: the same length, other content."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    path.write_bytes(bytes(data))


def test_flipped_bytes_of_the_same_length_are_caught_by_the_checksum(tmp_path: Path) -> None:
    """The adversarial case: same-length index.faiss with flipped bytes once loaded without
    error and searched with scores near 60. Now it is a broken index, named with its file."""
    root = tmp_path / "store"
    _store_with(root, "docs", "faq")
    for path in index_files(root, "docs"):
        flip_bytes(path)
    assert_docs_broken_faq_served(root)


def test_the_manifest_holds_the_checksum_of_every_other_file(tmp_path: Path) -> None:
    root = tmp_path / "store"
    _store_with(root, "docs")
    store = DocumentStore(root)
    store.open()
    try:
        snapshot = store.snapshot("docs")
        assert snapshot is not None
        files = {
            p.relative_to(snapshot.path).as_posix() for p in snapshot.path.rglob("*") if p.is_file()
        } - {MANIFEST}  # the BM25 index's files are in bm25/
        assert set(snapshot.manifest.checksums) == files
        for name, digest in snapshot.manifest.checksums.items():
            assert file_checksum(snapshot.path / name) == digest
    finally:
        store.close()


def test_a_score_outside_the_cosine_range_is_an_error_never_a_result(tmp_path: Path) -> None:
    """Vectors of norm 60 (no checksum can catch what was written so): a search's scores near
    60 are refused as a damaged index, and the collection is reported broken from then on."""
    root = tmp_path / "store"
    store = DocumentStore(root)
    store.open()
    try:
        vectors = np.full((2, DIM), 60.0 / np.sqrt(DIM), dtype=np.float32)
        chunks = [Chunk("a.rst", "Doc", "Part", i, f"chunk {i}") for i in range(2)]
        store.replace_source("docs", "a.rst", chunks, vectors)
        query = np.full(DIM, 1.0 / np.sqrt(DIM), dtype=np.float32)
        with pytest.raises(BrokenIndex, match="outside the cosine range") as caught:
            store.search("docs", query, 2)
        assert "60" in str(caught.value)
        assert "outside the cosine range" in store.check()["docs"]
        with pytest.raises(BrokenIndex):
            store.search("docs", query, 2)
    finally:
        store.close()
