"""DocumentStore: idempotent replacement, ranking, persistence, errors; no model needed."""

from __future__ import annotations

import threading
from pathlib import Path

import faiss
import numpy as np
import pytest

from retrieval import Chunk, DocumentStore, RetrievalError, UnknownCollection

DIM = 8


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _chunks(source: str, n: int, tag: str = "v1") -> list[Chunk]:
    return [Chunk(source, "Doc", f"Part {i}", i, f"{tag} chunk {i} of {source}") for i in range(n)]


def _current(root: Path, collection: str) -> Path:
    """The directory of ``collection``'s published snapshot."""
    folder = root / "collections" / collection
    return folder / "snapshots" / (folder / "CURRENT").read_text().strip()


def _ntotal(root: Path, collection: str) -> int:
    return int(faiss.read_index(str(_current(root, collection) / "index.faiss")).ntotal)


def test_open_creates_the_layout_and_is_idempotent(tmp_path: Path) -> None:
    store = DocumentStore(tmp_path / "store")
    store.open()
    store.open()
    assert (tmp_path / "store" / "collections").is_dir()
    assert store.collections() == {}
    store.close()
    store.close()


def test_replace_source_is_idempotent(store: DocumentStore) -> None:
    rng = np.random.default_rng(0)
    assert store.replace_source("docs", "a.rst", _chunks("a.rst", 5), _unit(rng, 5)) == 5
    assert store.replace_source("docs", "b.rst", _chunks("b.rst", 3), _unit(rng, 3)) == 3
    assert store.replace_source("docs", "a.rst", _chunks("a.rst", 5), _unit(rng, 5)) == 5
    assert store.collections() == {"docs": 8}
    assert store.sources("docs") == ["a.rst", "b.rst"]
    assert store.has_collection("docs") and not store.has_collection("other")
    assert _ntotal(store.root, "docs") == 8  # no duplicate ids in FAISS


def test_replacing_drops_the_old_chunks(store: DocumentStore) -> None:
    rng = np.random.default_rng(1)
    store.replace_source("docs", "a.rst", _chunks("a.rst", 4), _unit(rng, 4))
    vectors = _unit(rng, 2)
    store.replace_source("docs", "a.rst", _chunks("a.rst", 2, tag="v2"), vectors)
    assert store.collections() == {"docs": 2}
    assert _ntotal(store.root, "docs") == 2
    hits = store.search("docs", vectors[0], 10)
    assert len(hits) == 2 and all(h.text.startswith("v2 ") for h in hits)
    assert store.get([1, 2, 3, 4]) == []  # the first version's ids are gone, never reused


def test_search_ranks_by_cosine(store: DocumentStore) -> None:
    rng = np.random.default_rng(2)
    vectors = _unit(rng, 6)
    store.replace_source("docs", "a.rst", _chunks("a.rst", 6), vectors)
    query = vectors[3] + 0.1 * vectors[5]
    query /= np.linalg.norm(query)
    hits = store.search("docs", query, 3)
    assert len(hits) == 3
    assert hits[0].text == "v1 chunk 3 of a.rst" and hits[0].section == "Part 3"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].score == pytest.approx(float(vectors[3] @ query), abs=1e-5)
    assert (hits[0].collection, hits[0].source, hits[0].title) == ("docs", "a.rst", "Doc")
    assert hits[0].rerank_score is None
    assert [h.id for h in store.search("docs", query.reshape(1, -1), 3)] == [h.id for h in hits]
    assert len(store.search("docs", query, 50)) == 6
    assert store.search("docs", query, 0) == []


def test_get_keeps_the_given_order(store: DocumentStore) -> None:
    rng = np.random.default_rng(3)
    store.replace_source("docs", "a.rst", _chunks("a.rst", 3), _unit(rng, 3))
    ids = [h.id for h in store.search("docs", _unit(rng, 1)[0], 3)]
    passages = store.get([ids[2], 999, ids[0]])
    assert [p.id for p in passages] == [ids[2], ids[0]]
    assert all(p.score == 0.0 for p in passages)


def test_unknown_collection(store: DocumentStore) -> None:
    rng = np.random.default_rng(4)
    store.replace_source("docs", "a.rst", _chunks("a.rst", 1), _unit(rng, 1))
    store.replace_source("faq", "b.rst", _chunks("b.rst", 1), _unit(rng, 1))
    with pytest.raises(UnknownCollection) as caught:
        store.search("nope", _unit(rng, 1)[0], 3)
    assert caught.value.status_code == 404
    assert "'nope'" in str(caught.value) and "['docs', 'faq']" in str(caught.value)
    assert store.sources("nope") == []


def test_persists_across_close_and_open(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    vectors = _unit(rng, 4)
    store = DocumentStore(tmp_path / "store")
    store.open()
    store.replace_source("docs", "a.rst", _chunks("a.rst", 4), vectors)
    before = store.search("docs", vectors[1], 4)
    store.close()
    with pytest.raises(RetrievalError, match="not open"):
        store.collections()

    reopened = DocumentStore(tmp_path / "store")
    reopened.open()
    assert reopened.collections() == {"docs": 4}
    assert reopened.search("docs", vectors[1], 4) == before
    reopened.close()


def test_length_mismatch_changes_nothing(store: DocumentStore) -> None:
    rng = np.random.default_rng(6)
    store.replace_source("docs", "a.rst", _chunks("a.rst", 3), _unit(rng, 3))
    index_file = _current(store.root, "docs") / "index.faiss"
    saved = index_file.read_bytes()
    with pytest.raises(ValueError, match="3 chunk"):
        store.replace_source("docs", "a.rst", _chunks("a.rst", 3, tag="v2"), _unit(rng, 2))
    with pytest.raises(ValueError, match="dimensions"):
        wide = np.ones((3, DIM + 1), dtype=np.float32)
        store.replace_source("docs", "a.rst", _chunks("a.rst", 3, tag="v2"), wide)
    assert store.collections() == {"docs": 3}
    assert index_file.read_bytes() == saved
    assert all(p.text.startswith("v1 ") for p in store.search("docs", _unit(rng, 1)[0], 5))
    assert _current(store.root, "docs") == index_file.parent
    assert [p.name for p in (index_file.parent.parent).iterdir()] == [index_file.parent.name]


def test_emptying_the_last_source_removes_the_collection(store: DocumentStore) -> None:
    rng = np.random.default_rng(7)
    store.replace_source("docs", "a.rst", _chunks("a.rst", 2), _unit(rng, 2))
    assert store.replace_source("docs", "a.rst", [], np.zeros((0, DIM), np.float32)) == 0
    assert store.collections() == {}
    assert not (_current(store.root, "docs") / "index.faiss").exists()
    with pytest.raises(UnknownCollection):
        store.search("docs", _unit(rng, 1)[0], 1)


@pytest.mark.parametrize("name", ["", "../escape", "a/b", ".hidden"])
def test_collection_names_must_be_safe_file_names(store: DocumentStore, name: str) -> None:
    with pytest.raises(ValueError, match="collection name"):
        store.replace_source(name, "a.rst", _chunks("a.rst", 1), np.ones((1, DIM), np.float32))


def test_concurrent_writes_and_searches(store: DocumentStore) -> None:
    rng = np.random.default_rng(8)
    store.replace_source("docs", "base.rst", _chunks("base.rst", 4), _unit(rng, 4))
    query = _unit(rng, 1)[0]
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        local = np.random.default_rng(worker)
        try:
            for round_ in range(10):
                source = f"w{worker}.rst"
                store.replace_source(
                    "docs", source, _chunks(source, 3, f"r{round_}"), _unit(local, 3)
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def read() -> None:
        try:
            for _ in range(40):
                assert 1 <= len(store.search("docs", query, 5)) <= 5
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    threads += [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.collections() == {"docs": 4 + 3 * 3}
    assert _ntotal(store.root, "docs") == 13


def test_a_corrupt_index_costs_its_collection_not_the_store(tmp_path: Path) -> None:
    rng = np.random.default_rng(9)
    store = DocumentStore(tmp_path / "store")
    store.open()
    store.replace_source("docs", "a.rst", _chunks("a.rst", 2), _unit(rng, 2))
    store.replace_source("faq", "b.rst", _chunks("b.rst", 2), _unit(rng, 2))
    store.close()
    (_current(tmp_path / "store", "docs") / "index.faiss").write_bytes(b"garbage")

    store.open()
    assert store.collections() == {"docs": 0, "faq": 2}
    assert len(store.search("faq", _unit(rng, 1)[0], 5)) == 2
    with pytest.raises(RetrievalError, match="re-ingest"):
        store.search("docs", _unit(rng, 1)[0], 5)
    store.close()


def test_a_search_runs_on_the_calling_thread_and_leaves_its_openmp_setting(
    store: DocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One query is searched without FAISS's OpenMP team; the caller's setting is restored."""
    rng = np.random.default_rng(2)
    vectors = _unit(rng, 3)
    store.replace_source("docs", "a.rst", _chunks("a.rst", 3), vectors)
    faiss.omp_set_num_threads(2)
    settings: list[int] = []
    real = faiss.omp_set_num_threads

    def recorded(n: int) -> None:
        settings.append(n)
        real(n)

    monkeypatch.setattr(faiss, "omp_set_num_threads", recorded)
    assert len(store.search("docs", vectors[0], 2)) == 2
    assert settings == [1, 2]
    assert faiss.omp_get_max_threads() == 2
