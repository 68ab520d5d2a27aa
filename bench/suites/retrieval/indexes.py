"""``ragtime bench retrieval``: FAISS index types at collection sizes, on synthetic vectors.

For each size (``--sizes``, default 10k, 100k and 1M) the bench draws random but clustered
384-d vectors (``--clusters`` unit centres, each point its centre plus Gaussian noise, then
normalised, so that neighbours share a cluster as passages share a topic) and queries drawn the
same way; each size's vectors come from their own seed, so a size is the same set whatever
else is run. It builds each index type as the store builds it (``retrieval.search.index_types``:
``choose_spec`` with the kind forced, then ``build_index``; the defaults of ``IndexSettings``
for M, efConstruction, nlist and PQ), timing the build (training, then adding: the add rate is
the ingest throughput in vectors/s) with ``--threads`` OpenMP threads, and measures, one query
at a time on one thread (as the store searches):

* search latency, p50 and p99 over ``--queries`` queries;
* recall@10 against exact search (the Flat index's top 10);
* memory: the serialised index's size in bytes.

HNSW is measured at each ``--ef-search`` and IVF-PQ at each ``--nprobe``. With
``--index-dir`` each built index is saved there with its build figures and loaded by a later
run of the same size, kind and seed, so a long build (HNSW at 1M) can run in the background
and the timed searches on a quiet machine. The target is HNSW p50 under 1 ms with recall@10
>= 0.95 at the largest size: the report names the smallest efSearch that reaches the recall
and says whether its p50 is under 1 ms.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from retrieval.search.index_types import IndexSettings, IndexSpec, build_index, choose_spec
from retrieval.search.index_types import search_parameters as _search_parameters

DIM = 384
INDEX_TYPES = ("flat", "hnsw", "ivfpq")
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


def index_spec(kind: str, size: int) -> IndexSpec:
    """The spec the store would build for ``size`` vectors with ``RAGTIME_INDEX_KIND=kind``."""
    if kind not in INDEX_TYPES:
        raise ValueError(f"unknown index type {kind!r}; known: {', '.join(INDEX_TYPES)}")
    return choose_spec(size, IndexSettings(kind=kind))  # type: ignore[arg-type]


def _with_param(spec: IndexSpec, value: int | None) -> tuple[IndexSpec, str]:
    """``spec`` searched at efSearch or nprobe ``value``, and the row's label for it."""
    name = {"hnsw": "efSearch", "ivfpq": "nprobe"}.get(spec.kind)
    if name is None or value is None:
        return spec, ""
    return dataclasses.replace(spec, params={**spec.params, name: value}), f"{name}={value}"


def _built(
    spec: IndexSpec, data: np.ndarray, key: str, index_dir: Path | None
) -> tuple[Any, float, float]:
    """The index of ``spec`` over ``data``, its build seconds and its add rate (vectors/s):
    loaded from ``index_dir`` when an earlier run saved it under ``key``, else built (and
    saved there)."""
    keep = index_dir is not None and spec.kind != "flat"  # a Flat index builds in seconds
    saved = index_dir / f"{key}.faiss" if index_dir and keep else None
    figures = index_dir / f"{key}.json" if index_dir and keep else None
    if saved and figures and saved.exists() and figures.exists():
        done = json.loads(figures.read_text())
        return faiss.read_index(str(saved)), done["build_s"], done["add_vectors_per_s"]
    ids = np.arange(len(data), dtype=np.int64)
    started = time.perf_counter()
    index = build_index(data, ids, spec)
    build_s = time.perf_counter() - started
    # build_index trains and adds in one call: for IVF-PQ the add is timed again on a reset
    # copy of the trained index; for Flat and HNSW the whole build is adding.
    add_s = build_s
    if spec.kind == "ivfpq":
        inner = faiss.downcast_index(index.index)
        fresh = faiss.clone_index(inner)
        fresh.reset()
        started = time.perf_counter()
        fresh.add(data)
        add_s = time.perf_counter() - started
        del fresh
    rate = len(data) / max(add_s, 1e-9)
    if saved and figures:
        saved.parent.mkdir(parents=True, exist_ok=True)
        faiss.write_index(index, str(saved))
        figures.write_text(json.dumps({"build_s": build_s, "add_vectors_per_s": rate}) + "\n")
    return index, build_s, rate


def _latencies(
    index: Any, queries: np.ndarray, k: int, params: Any
) -> tuple[list[float], np.ndarray]:
    ids = np.empty((len(queries), k), dtype=np.int64)
    times = []
    for row, query in enumerate(queries):
        started = time.perf_counter()
        _, found = index.search(query.reshape(1, -1), k, params=params)
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
    index_dir: Path | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> RetrievalBench:
    """Build (or load from ``index_dir``) and measure every index type at every size."""
    for kind in kinds:
        index_spec(kind, 1000)  # an unknown kind fails before anything is built
    if queries < 1 or any(size < 10 for size in sizes):
        raise ValueError("need at least 1 query and sizes of at least 10 vectors")
    centres = unit_centres(clusters, DIM, np.random.default_rng(seed))
    query_vectors = clustered_vectors(queries, centres, np.random.default_rng([seed, 0]))
    rows: list[IndexRow] = []
    notes: list[str] = []
    before = faiss.omp_get_max_threads()
    try:
        for size in sizes:
            data = clustered_vectors(size, centres, np.random.default_rng([seed, size]))
            faiss.omp_set_num_threads(1)
            exact_index = faiss.IndexFlatIP(DIM)
            exact_index.add(data)
            _, exact = exact_index.search(query_vectors, 10)
            del exact_index
            for kind in kinds:
                spec = index_spec(kind, size)
                if spec.kind != kind:
                    notes.append(
                        f"{kind} at {size}: not built; the store builds {spec.kind} ({spec.reason})"
                    )
                    say(notes[-1])
                    continue
                params = "-".join(
                    f"{k}{v}"
                    for k, v in sorted(spec.params.items())
                    if k not in ("efSearch", "nprobe")
                )
                key = f"{kind}-{size}-c{clusters}-s{seed}" + (f"-{params}" if params else "")
                faiss.omp_set_num_threads(threads)
                index, build_s, rate = _built(spec, data, key, index_dir)
                faiss.omp_set_num_threads(1)
                memory = int(faiss.serialize_index(index).nbytes)
                say(f"{kind} at {size}: built in {build_s:.1f} s, {memory} bytes")
                values: Sequence[int | None] = {"hnsw": ef_search, "ivfpq": nprobe}.get(
                    kind, [None]
                )
                for value in values:
                    searched, label = _with_param(spec, value)
                    times, found = _latencies(
                        index, query_vectors, 10, _search_parameters(searched)
                    )
                    rows.append(
                        IndexRow(
                            kind,
                            size,
                            label,
                            round(build_s, 6),
                            round(rate, 1),
                            memory,
                            round(statistics.median(times), 4),
                            round(_p99(times), 4),
                            round(recall_at_10(found, exact), 4),
                        )
                    )
                    say(f"  {rows[-1]}")
                del index
    finally:
        faiss.omp_set_num_threads(before)
    return RetrievalBench(DIM, clusters, queries, threads, rows, target_verdict(rows), notes)


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
    lines.extend(f"\n{note}" for note in result.notes)
    lines.append(
        f"\nTarget (HNSW p50 < {TARGET_P50_MS} ms, recall@10 >= {TARGET_RECALL}): {result.target}"
    )
    return "\n".join(lines)
