"""How a filtered search should run: exact over the matching chunks' stored vectors, FAISS with
an ``IDSelectorBatch``, or over-fetch then filter; per filter selectivity, on flat and HNSW.

``python -m bench.studies.filtered_search [--n 50000] [--queries 50]``: unit vectors of 384
dimensions around 1,000 topics, in sources of 100 chunks; a filter keeps 1, 10, 100 or all
sources. Prints, per method, the median ms of a search of k=10 (building the selector
included; the SQL lookup of the matching ids, common to all, excluded) and recall@10 against
the exact filtered answer. The store (``retrieval/store/snapshot.py``) searches exactly up to
``EXACT_FILTER_MAX`` matching chunks and with a selector above, from these figures.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

import faiss
import numpy as np

from retrieval.search.index_types import (
    IndexSettings,
    IndexSpec,
    build_index,
    choose_spec,
    search_parameters,
)

K = 10
CHUNKS_PER_SOURCE = 100


def _exact(vectors: np.ndarray, allowed: np.ndarray, query: np.ndarray) -> np.ndarray:
    scores = vectors[allowed] @ query[0]
    top = np.argpartition(-scores, K - 1)[:K]
    return allowed[top[np.argsort(-scores[top])]]


def _selector(index: object, spec: IndexSpec, allowed: np.ndarray, query: np.ndarray) -> np.ndarray:
    params = search_parameters(spec, faiss.IDSelectorBatch(allowed))
    return index.search(query, K, params=params)[1][0]  # type: ignore[attr-defined]


def _overfetch(
    index: object, spec: IndexSpec, allowed: np.ndarray, query: np.ndarray
) -> np.ndarray:
    keep = set(allowed.tolist())
    fetch = K * 4
    ntotal = index.ntotal  # type: ignore[attr-defined]
    while True:
        params = search_parameters(spec)
        found = index.search(query, min(fetch, ntotal), params=params)[1][0]  # type: ignore[attr-defined]
        kept = [i for i in found if i in keep]
        if len(kept) >= K or fetch >= ntotal:
            return np.asarray(kept[:K])
        fetch *= 4


def _clustered(rng: np.random.Generator, n: int, topics: int = 1000) -> np.ndarray:
    """Unit vectors around ``topics`` random centres (embeddings have such structure; plain
    random 384-d vectors are all about equally far apart, where no approximate index works)."""
    centres = np.random.default_rng(1).normal(size=(topics, 384)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    noise = rng.normal(scale=0.05, size=(n, 384)).astype(np.float32)
    vectors = centres[rng.integers(0, topics, n)] + noise
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    vectors = _clustered(rng, args.n)
    ids = np.arange(args.n, dtype=np.int64)
    queries = _clustered(rng, args.queries)
    sources = args.n // CHUNKS_PER_SOURCE
    threads = faiss.omp_get_max_threads()
    print(f"n={args.n} dim=384 k={K} queries={args.queries} faiss threads={threads}")
    print("| index | matching chunks | method | p50 ms | recall@10 |")
    print("| --- | --- | --- | --- | --- |")
    for kind in ("flat", "hnsw"):
        spec = (
            IndexSpec("flat") if kind == "flat" else choose_spec(args.n, IndexSettings(kind="hnsw"))
        )
        index = build_index(vectors, ids, spec)
        for keep in (1, 10, 100, sources):
            chosen = rng.choice(sources, keep, replace=False)
            allowed = np.sort(
                (chosen[:, None] * CHUNKS_PER_SOURCE + np.arange(CHUNKS_PER_SOURCE)).ravel()
            )
            methods: dict[str, Callable[[np.ndarray], np.ndarray]] = {
                "exact over stored vectors": partial(_exact, vectors, allowed),
                "IDSelectorBatch": partial(_selector, index, spec, allowed),
                "over-fetch x4": partial(_overfetch, index, spec, allowed),
            }
            for name, method in methods.items():
                times, recalls = [], []
                for q in queries:
                    query = (q / np.linalg.norm(q)).reshape(1, -1).astype(np.float32)
                    truth = set(_exact(vectors, allowed, query).tolist())
                    start = time.perf_counter()
                    found = method(query)
                    times.append((time.perf_counter() - start) * 1000)
                    recalls.append(len(truth & set(np.asarray(found).tolist())) / K)
                median, recall = statistics.median(times), statistics.mean(recalls)
                print(f"| {kind} | {len(allowed)} | {name} | {median:.2f} | {recall:.3f} |")


if __name__ == "__main__":
    main()
