"""``ragtime bench retrieval``: FAISS index types at collection sizes, on synthetic vectors.

For each size (``--sizes``, default 10k, 100k and 1M) the bench draws random but clustered
384-d vectors (``--clusters`` unit centres, each point its centre plus Gaussian noise, then
normalised, so that neighbours share a cluster as passages share a topic) and queries drawn the
same way. It builds each index type (``build_index``: Flat, HNSW, IVF-PQ), timing the build
(training, then adding: the add rate is the ingest throughput in vectors/s), and measures:

* search latency one query at a time, p50 and p99 over ``--queries`` queries;
* recall@10 against exact search (the Flat index's top 10);
* memory: the serialised index's size in bytes.

HNSW is measured at each ``--ef-search`` and IVF-PQ at each ``--nprobe``. The target is HNSW p50
under 1 ms with recall@10 >= 0.95 at the largest size: the report names the smallest efSearch
that reaches the recall and says whether its p50 is under 1 ms.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import faiss
import numpy as np

DIM = 384
INDEX_TYPES = ("flat", "hnsw", "ivfpq")
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 64
PQ_SUBQUANTIZERS = 48  # 8 dimensions each, 8 bits: 48 bytes a vector
TARGET_P50_MS = 1.0
TARGET_RECALL = 0.95


@dataclass(frozen=True)
class IndexRow:
    index: str
    size: int
    param: str  # "efSearch=64", "nprobe=16", "" for Flat
    build_s: float
    add_vectors_per_s: float
    bytes: int
    search_p50_ms: float
    search_p99_ms: float
    recall_at_10: float


@dataclass
class RetrievalBench:
    dim: int
    clusters: int
    queries: int
    threads: int
    rows: list[IndexRow]
    target: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def clustered_vectors(
    n: int, centres: np.ndarray, rng: np.random.Generator, noise: float = 0.8
) -> np.ndarray:
    """``n`` unit vectors, each a random centre plus noise of norm about ``noise``."""
    out = np.empty((n, centres.shape[1]), dtype=np.float32)
    step = 50_000
    for start in range(0, n, step):
        m = min(step, n - start)
        picks = rng.integers(0, len(centres), size=m)
        block = centres[picks] + rng.standard_normal((m, centres.shape[1]), dtype=np.float32) * (
            noise / math.sqrt(centres.shape[1])
        )
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + m] = block
    return out


def unit_centres(count: int, dim: int, rng: np.random.Generator) -> np.ndarray:
    centres = rng.standard_normal((count, dim), dtype=np.float32)
    return np.asarray(centres / np.linalg.norm(centres, axis=1, keepdims=True), dtype=np.float32)


def build_index(kind: str, dim: int, size: int) -> Any:
    """An empty, untrained index of ``kind`` for about ``size`` vectors (inner product).

    The one place the bench makes indexes: point it at ``retrieval.index_types`` once the store
    chooses its index type there."""
    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    if kind == "hnsw":
        hnsw = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        return hnsw
    if kind == "ivfpq":
        nlist = max(16, int(4 * math.sqrt(size)))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFPQ(
            quantizer, dim, nlist, PQ_SUBQUANTIZERS, 8, faiss.METRIC_INNER_PRODUCT
        )
        # Polysemous training (on by default) optimises codes for Hamming filtering, which
        # plain IVF-PQ search does not use; it took minutes even on 500 vectors.
        index.do_polysemous_training = False  # type: ignore[attr-defined]  # not in the stubs
        return index
    raise ValueError(f"unknown index type {kind!r}; known: {', '.join(INDEX_TYPES)}")


def _set_search_param(index: Any, kind: str, value: int) -> str:
    if kind == "hnsw":
        index.hnsw.efSearch = value
        return f"efSearch={value}"
    if kind == "ivfpq":
        index.nprobe = value
        return f"nprobe={value}"
    return ""


def _latencies(index: Any, queries: np.ndarray, k: int) -> tuple[list[float], np.ndarray]:
    ids = np.empty((len(queries), k), dtype=np.int64)
    times = []
    for row, query in enumerate(queries):
        started = time.perf_counter()
        _, found = index.search(query.reshape(1, -1), k)
        times.append((time.perf_counter() - started) * 1000.0)
        ids[row] = found[0]
    return times, ids


def recall_at_10(found: np.ndarray, exact: np.ndarray) -> float:
    """The mean share of each query's exact top 10 found in its approximate top 10."""
    hits = sum(
        len(set(f[:10].tolist()) & set(e[:10].tolist())) for f, e in zip(found, exact, strict=True)
    )
    return hits / (10 * len(exact))


def _p99(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def run_bench(
    sizes: Sequence[int],
    *,
    kinds: Sequence[str] = INDEX_TYPES,
    ef_search: Sequence[int] = (16, 32, 64, 128),
    nprobe: Sequence[int] = (8, 32),
    queries: int = 200,
    clusters: int = 1000,
    threads: int = 1,
    seed: int = 0,
    say: Callable[[str], None] = lambda line: None,
) -> RetrievalBench:
    """Build and measure every index type at every size."""
    for kind in kinds:
        build_index(kind, DIM, 1000)  # an unknown kind fails before anything is built
    if queries < 1 or any(size < 10 for size in sizes):
        raise ValueError("need at least 1 query and sizes of at least 10 vectors")
    faiss.omp_set_num_threads(threads)
    rng = np.random.default_rng(seed)
    centres = unit_centres(clusters, DIM, rng)
    query_vectors = clustered_vectors(queries, centres, rng)
    rows: list[IndexRow] = []
    for size in sizes:
        data = clustered_vectors(size, centres, rng)
        exact_index = faiss.IndexFlatIP(DIM)
        exact_index.add(data)
        _, exact = exact_index.search(query_vectors, 10)
        del exact_index
        for kind in kinds:
            index = build_index(kind, DIM, size)
            started = time.perf_counter()
            if not index.is_trained:
                sample = data[rng.choice(size, size=min(size, 100_000), replace=False)]
                index.train(sample)
            added = time.perf_counter()
            index.add(data)
            done = time.perf_counter()
            memory = int(faiss.serialize_index(index).nbytes)
            say(f"{kind} at {size}: built in {done - started:.1f} s, {memory} bytes")
            params: Sequence[int | None] = {"hnsw": ef_search, "ivfpq": nprobe}.get(kind, [None])
            for value in params:
                param = _set_search_param(index, kind, value) if value is not None else ""
                times, found = _latencies(index, query_vectors, 10)
                rows.append(
                    IndexRow(
                        kind,
                        size,
                        param,
                        round(done - started, 6),
                        round(size / max(done - added, 1e-9), 1),
                        memory,
                        round(statistics.median(times), 4),
                        round(_p99(times), 4),
                        round(recall_at_10(found, exact), 4),
                    )
                )
                say(f"  {rows[-1]}")
            del index
    return RetrievalBench(DIM, clusters, queries, threads, rows, target_verdict(rows))


def target_verdict(rows: Sequence[IndexRow]) -> str:
    """Whether HNSW reaches recall@10 >= 0.95 with p50 under 1 ms at the largest size."""
    hnsw = [r for r in rows if r.index == "hnsw"]
    if not hnsw:
        return "HNSW not measured"
    size = max(r.size for r in hnsw)
    good = [r for r in hnsw if r.size == size and r.recall_at_10 >= TARGET_RECALL]
    if not good:
        best = max((r for r in hnsw if r.size == size), key=lambda r: r.recall_at_10)
        return (
            f"NOT met at {size}: no efSearch tried reaches recall@10 {TARGET_RECALL} "
            f"(best {best.recall_at_10} at {best.param}, p50 {best.search_p50_ms} ms)"
        )
    chosen = good[0]
    verdict = "met" if chosen.search_p50_ms < TARGET_P50_MS else "NOT met"
    return (
        f"{verdict} at {size}: {chosen.param} is the smallest tried with recall@10 >= "
        f"{TARGET_RECALL} ({chosen.recall_at_10}); its p50 is {chosen.search_p50_ms} ms "
        f"(target < {TARGET_P50_MS} ms)"
    )


def table(result: RetrievalBench) -> str:
    lines = [
        "| index | vectors | search param | build s | add vectors/s | bytes | p50 ms | p99 ms "
        "| recall@10 |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in result.rows:
        lines.append(
            f"| {r.index} | {r.size:,} | {r.param} | {r.build_s:.2f} | {r.add_vectors_per_s:,.0f} "
            f"| {r.bytes:,} | {r.search_p50_ms:.3f} | {r.search_p99_ms:.3f} "
            f"| {r.recall_at_10:.3f} |"
        )
    lines.append(
        f"\nTarget (HNSW p50 < {TARGET_P50_MS} ms, recall@10 >= {TARGET_RECALL}): {result.target}"
    )
    return "\n".join(lines)
