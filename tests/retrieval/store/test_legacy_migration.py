"""A data dir of the old layout (``chunks.sqlite3`` + ``faiss/<collection>.faiss``) becomes
snapshots on ``open()``: same chunks, same vectors, same backend; the old files are kept aside."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from retrieval import DocumentStore
from tests.helpers.legacy_store import write_legacy_collection


def _unit(n: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(n, 8)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_the_old_layout_is_migrated_on_open(tmp_path: Path) -> None:
    vectors = _unit(3, 0)
    rows = [("a.md", "alpha"), ("a.md", "beta"), ("b.rst", "gamma")]
    write_legacy_collection(tmp_path, "docs", rows, vectors, backend="onnx-int8")
    write_legacy_collection(tmp_path, "faq", [("q.txt", "question")], _unit(1, 1), backend=None)
    store = DocumentStore(tmp_path, embedding_backend="onnx-int8")
    store.open()
    assert store.collections() == {"docs": 3, "faq": 1}
    assert store.embedding_backend_of("docs") == "onnx-int8"
    assert store.embedding_backend_of("faq") == "torch"  # unrecorded: torch, as before
    for i, text in enumerate(["alpha", "beta", "gamma"]):
        hit = store.search("docs", vectors[i], 1)[0]
        assert hit.text == text and hit.score == pytest.approx(1.0, abs=1e-5)
    assert store.sources("docs") == ["a.md", "b.rst"] and store.kinds("docs") == {"md": 2, "rst": 1}
    store.close()
    assert not (tmp_path / "chunks.sqlite3").exists() and not (tmp_path / "faiss").exists()
    backup = tmp_path / "legacy-backup"
    assert (backup / "chunks.sqlite3").is_file() and (backup / "faiss" / "docs.faiss").is_file()
    store.open()  # nothing left to migrate: the snapshots are served as they are
    assert store.snapshot("docs") is not None and store.snapshot("docs").version == "v000001"  # type: ignore[union-attr]
    store.close()


def test_a_collection_whose_old_index_is_gone_is_left_out_and_the_files_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_legacy_collection(tmp_path, "docs", [("a.md", "alpha")], _unit(1, 2))
    write_legacy_collection(tmp_path, "lost", [("b.md", "beta")], _unit(1, 3))
    (tmp_path / "faiss" / "lost.faiss").unlink()
    store = DocumentStore(tmp_path)
    with caplog.at_level(logging.ERROR):
        store.open()
    assert store.collections() == {"docs": 1}
    assert "cannot migrate collection 'lost'" in caplog.text
    assert (tmp_path / "chunks.sqlite3").is_file()  # kept until every collection migrates
    store.close()
