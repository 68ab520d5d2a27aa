"""Index selection by collection size, the kinds' parameters, HNSW's recall against exact
search on random vectors, and where an index runs (CPU here: no GPU in CI)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import faiss
import numpy as np
import pytest

from retrieval.search.index_types import (
    IndexSettings,
    IndexSpec,
    build_index,
    choose_spec,
    gpu_decision,
    search_parameters,
    to_device,
)


@pytest.fixture(autouse=True)
def one_faiss_thread() -> Iterator[None]:
    """FAISS's OpenMP threads spin when the cores are shared (k-means 5x slower here)."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


def _unit(n: int, dim: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_auto_is_flat_below_the_threshold_and_approximate_from_it() -> None:
    settings = IndexSettings(threshold=1000)
    assert choose_spec(999, settings).kind == "flat"
    hnsw = choose_spec(1000, settings)
    assert hnsw == IndexSpec(
        "hnsw",
        {"M": 32, "efConstruction": 80, "efSearch": 128},
        "auto: 1000 vectors >= threshold 1000",
    )
    ivf = choose_spec(100_000, IndexSettings(threshold=1000, large_kind="ivfpq"))
    assert ivf.kind == "ivfpq"
    assert ivf.params == {"nlist": 1024, "nprobe": 16, "pq_m": 48, "pq_bits": 8}


def test_ivfpq_fits_its_lists_to_the_data_or_falls_back_to_flat() -> None:
    settings = IndexSettings(kind="ivfpq", ivf_nlist=4096, ivf_nprobe=64)
    small = choose_spec(20_000, settings)
    assert small.params["nlist"] == 20_000 // 39 and small.params["nprobe"] == 64
    too_few = choose_spec(5_000, settings)
    assert too_few.kind == "flat" and "too few to train PQ" in too_few.reason
    with pytest.raises(ValueError, match=r"pq_m \(7\) must divide the dimension \(384\)"):
        choose_spec(20_000, IndexSettings(kind="ivfpq", pq_m=7))


def test_a_configured_kind_ignores_the_size() -> None:
    assert choose_spec(10, IndexSettings(kind="hnsw")).kind == "hnsw"
    assert choose_spec(10**7, IndexSettings(kind="flat")).kind == "flat"


def test_the_spec_round_trips_and_names_its_span_attributes() -> None:
    spec = choose_spec(10, IndexSettings(kind="hnsw", hnsw_ef_search=40))
    assert IndexSpec.from_json(spec.to_json()) == spec
    assert spec.attributes() == {
        "ragtime.index.kind": "hnsw",
        "ragtime.index.M": 32,
        "ragtime.index.efConstruction": 80,
        "ragtime.index.efSearch": 40,
    }


def _recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(
        np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=True)])
    )


def test_hnsw_recall_against_exact_search() -> None:
    vectors, queries = _unit(4000, 64, 0), _unit(50, 64, 1)
    ids = np.arange(10, 4010, dtype=np.int64)
    exact = build_index(vectors, ids, IndexSpec("flat"))
    _, truth = exact.search(queries, 10)
    spec = choose_spec(4000, IndexSettings(threshold=1000, hnsw_m=16, hnsw_ef_search=128), 64)
    hnsw = build_index(vectors, ids, spec)
    inner: Any = faiss.downcast_index(hnsw.index)
    assert inner.hnsw.efSearch == 128
    _, found = hnsw.search(queries, 10, params=search_parameters(spec))
    assert _recall(found, truth) >= 0.9
    _, weak = hnsw.search(
        queries, 10, params=search_parameters(IndexSpec("hnsw", spec.params | {"efSearch": 10}))
    )
    assert _recall(weak, truth) < _recall(found, truth)  # efSearch is applied per search


def test_ivfpq_builds_and_finds_neighbours() -> None:
    vectors = _unit(10_000, 8, 2)
    spec = choose_spec(10_000, IndexSettings(kind="ivfpq", pq_m=4, ivf_nlist=16, ivf_nprobe=4), 8)
    assert spec.kind == "ivfpq"
    index = build_index(vectors, np.arange(10_000, dtype=np.int64), spec)
    _, found = index.search(vectors[:20], 1, params=search_parameters(spec))
    assert np.mean(found[:, 0] == np.arange(20)) >= 0.8  # PQ is lossy, but finds itself


def test_an_id_selector_restricts_every_kind() -> None:
    vectors = _unit(2000, 16, 3)
    ids = np.arange(2000, dtype=np.int64)
    allowed = np.arange(0, 2000, 7, dtype=np.int64)
    for spec in (IndexSpec("flat"), choose_spec(2000, IndexSettings(kind="hnsw"), 16)):
        index = build_index(vectors, ids, spec)
        params = search_parameters(spec, faiss.IDSelectorBatch(allowed))
        _, found = index.search(vectors[:5], 10, params=params)
        assert set(found.ravel().tolist()) <= set(allowed.tolist())


def test_build_index_checks_its_inputs() -> None:
    with pytest.raises(ValueError, match="3 vectors but 2 ids"):
        build_index(_unit(3, 4, 4), np.arange(2), IndexSpec("flat"))
    with pytest.raises(ValueError, match="2-d"):
        build_index(np.zeros(4, np.float32), np.arange(1), IndexSpec("flat"))


@pytest.mark.parametrize(
    ("kind", "wanted", "gpus", "support", "on_gpu", "reason"),
    [
        ("flat", True, 1, True, True, "gpu: 1 CUDA device(s)"),
        ("ivfpq", True, 2, True, True, "gpu: 2 CUDA device(s)"),
        ("hnsw", True, 1, True, False, "cpu: FAISS has no GPU HNSW"),
        ("flat", True, 0, True, False, "cpu: no CUDA device visible"),
        ("flat", True, 1, False, False, "cpu: this faiss has no GPU support (install faiss-gpu)"),
        (
            "flat",
            False,
            1,
            True,
            False,
            "cpu: the GPU is switched off (RAGTIME_INDEX_USE_GPU=false)",
        ),
    ],
)
def test_gpu_decision(
    kind: str, wanted: bool, gpus: int, support: bool, on_gpu: bool, reason: str
) -> None:
    spec = IndexSpec(kind, {"M": 8, "efConstruction": 8, "efSearch": 8})  # type: ignore[arg-type]
    assert gpu_decision(spec, wanted=wanted, num_gpus=gpus, has_gpu_support=support) == (
        on_gpu,
        reason,
    )


def test_here_the_index_stays_on_the_cpu() -> None:
    index = build_index(_unit(10, 8, 5), np.arange(10), IndexSpec("flat"))
    moved, reason = to_device(index, IndexSpec("flat"), wanted=True)
    assert moved is index and reason.startswith("cpu: ")
