"""Search filters: their checks, and that each way a filtered search runs (exact over the
stored vectors, an id selector in the index, flat or HNSW) returns what brute force does."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retrieval import Chunk, DocumentStore, IndexSettings, InvalidFilter, SearchFilter
from retrieval.store import snapshot

DIM = 16
KINDS = ("md", "pdf", "txt")


def test_filter_values_are_checked() -> None:
    assert SearchFilter.of(None, None) == SearchFilter() and not SearchFilter().active
    assert SearchFilter.of("a/", "md") == SearchFilter("a/", ("md",))
    assert SearchFilter.of("", ["md", "pdf", "md"]).kinds == ("md", "pdf")
    with pytest.raises(InvalidFilter, match="kind: file types are 1-16 lowercase") as caught:
        SearchFilter(kinds=("PDF",))
    assert caught.value.field == "kind" and caught.value.status_code == 422
    with pytest.raises(InvalidFilter, match="at most 32"):
        SearchFilter(kinds=tuple(f"k{i}" for i in range(33)))
    with pytest.raises(InvalidFilter, match="source_prefix: sources are POSIX paths"):
        SearchFilter(source_prefix="C:\\docs")


def test_the_prefix_is_a_range_not_a_pattern() -> None:
    condition, params = SearchFilter("docs_%/").sql()
    assert condition == "source >= ? AND source < ?" and params[0] == "docs_%/"


@pytest.fixture
def filled(tmp_path: Path) -> tuple[DocumentStore, np.ndarray]:
    """300 chunks over 30 sources in 3 folders and 3 kinds, HNSW from 100 chunks up."""
    rng = np.random.default_rng(0)
    store = DocumentStore(tmp_path, index_settings=IndexSettings(threshold=100, hnsw_m=16))
    store.open()
    all_vectors = []
    with store.writer("docs") as writer:
        for s in range(30):
            source = f"folder{s % 3}/file{s}.{KINDS[s % 3]}"
            chunks = [
                Chunk(source, "T", "", i, f"{source} #{i}", kind=KINDS[s % 3]) for i in range(10)
            ]
            vectors = rng.normal(size=(10, DIM)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            writer.replace_source(source, chunks, vectors)
            all_vectors.append(vectors)
    return store, np.concatenate(all_vectors)


@pytest.mark.parametrize("exact_max", [snapshot.EXACT_FILTER_MAX, 0])
@pytest.mark.parametrize(
    "search_filter",
    [
        SearchFilter("folder1/"),
        SearchFilter(kinds=("md", "txt")),
        SearchFilter("folder0/file1", ("md",)),
    ],
)
def test_filtered_search_matches_brute_force(
    filled: tuple[DocumentStore, np.ndarray],
    search_filter: SearchFilter,
    exact_max: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(snapshot, "EXACT_FILTER_MAX", exact_max)
    store, vectors = filled
    query = vectors[7] + 0.5 * vectors[123]
    query /= np.linalg.norm(query)
    hits, info = store.search_with_info("docs", query, 5, search_filter)
    assert info.method == ("exact-filtered" if exact_max else "index-filtered")
    assert info.index.kind == "hnsw"
    prefix, kinds = search_filter.source_prefix, search_filter.kinds
    scores = vectors @ query  # brute force: chunk id i + 1 is row i
    kept = [
        p
        for p in store.get(list(range(1, 301)))
        if p.source.startswith(prefix) and (not kinds or p.kind in kinds)
    ]
    expected = sorted(kept, key=lambda p: -scores[p.id - 1])[:5]
    assert [p.id for p in hits] == [p.id for p in expected]
    assert all(p.source.startswith(prefix) for p in hits)


def test_a_filter_that_matches_nothing_finds_nothing(
    filled: tuple[DocumentStore, np.ndarray],
) -> None:
    store, vectors = filled
    assert store.search("docs", vectors[0], 5, SearchFilter("nowhere/")) == []


def test_a_kind_the_collection_lacks_is_refused(filled: tuple[DocumentStore, np.ndarray]) -> None:
    store, _ = filled
    store.check_filter("docs", SearchFilter(kinds=("md",)))
    with pytest.raises(
        InvalidFilter, match=r"holds no 'docx' files; its file types are \['md', 'pdf', 'txt'\]"
    ):
        store.check_filter("docs", SearchFilter(kinds=("docx", "md")))
