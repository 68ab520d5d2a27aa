"""Which FAISS index a collection gets, by its size, and how it is built and searched.

Self-contained (numpy and faiss only), so that benches can build the same indexes:

- ``choose_spec(n, settings)`` picks the index for ``n`` vectors: exact ``flat`` below
  ``settings.threshold`` (or always, with ``kind="flat"``), else ``hnsw`` or ``ivfpq`` with
  their parameters. The returned ``IndexSpec`` is what a snapshot's manifest records and what
  the search span carries (``IndexSpec.attributes()``).
- ``build_index(vectors, ids, spec)`` builds it: an ``IndexIDMap`` (ids are the chunk ids) over
  ``IndexFlatIP``, ``IndexHNSWFlat`` or ``IndexIVFPQ``, all by inner product (vectors are
  L2-normalised, so this is cosine).
- ``search_parameters(spec, selector)`` gives the per-search parameters (efSearch, nprobe)
  and an optional id selector (a metadata filter).
- ``gpu_decision(spec, ...)`` says whether the index goes to a GPU: only with CUDA and a
  faiss build with GPU support, and only for the kinds FAISS has on the GPU (flat, IVF-PQ;
  FAISS has no GPU HNSW). ``to_device(index, spec)`` applies it.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import faiss
import numpy as np

#: faiss's bundled stubs lack the search-parameter classes; reach them untyped.
_faiss: Any = faiss
IndexKind = Literal["auto", "flat", "hnsw", "ivfpq"]
#: Fewest training vectors per IVF list that FAISS's k-means accepts without a warning.
MIN_POINTS_PER_LIST = 39
#: PQ codes of 8 bits: k-means of 256 centroids per sub-quantizer needs that many vectors.
PQ_CENTROIDS = 256


@dataclass(frozen=True)
class IndexSettings:
    """What the configuration says (``RAGTIME_INDEX_*``): the kind (``auto`` follows the
    collection's size), the size threshold for ``auto``, and each kind's parameters."""

    kind: IndexKind = "auto"
    threshold: int = 50_000  # auto: flat below this many vectors, ``large_kind`` from it up
    large_kind: Literal["hnsw", "ivfpq"] = "hnsw"
    hnsw_m: int = 32
    hnsw_ef_construction: int = 80
    hnsw_ef_search: int = 128  # recall@10 0.97 at 1M (``ragtime bench retrieval``)
    ivf_nlist: int = 1024
    ivf_nprobe: int = 16
    pq_m: int = 48  # sub-quantizers; must divide the dimension (384 = 48 x 8)
    use_gpu: bool = True  # move the index to a GPU when CUDA and faiss-gpu are there


@dataclass(frozen=True)
class IndexSpec:
    """One index as built: its kind, its parameters, and why it was chosen."""

    kind: Literal["flat", "hnsw", "ivfpq"]
    params: dict[str, int] = field(default_factory=dict)
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> IndexSpec:
        return cls(data["kind"], {k: int(v) for k, v in data["params"].items()}, data["reason"])

    def attributes(self) -> dict[str, str | int]:
        """The span attributes: ``ragtime.index.kind`` and ``ragtime.index.<param>``."""
        out: dict[str, str | int] = {"ragtime.index.kind": str(self.kind)}
        out.update((f"ragtime.index.{name}", value) for name, value in self.params.items())
        return out


def choose_spec(n: int, settings: IndexSettings, dim: int = 384) -> IndexSpec:
    """The index for ``n`` vectors of ``dim`` dimensions under ``settings``.

    An IVF-PQ index needs enough vectors to train (``MIN_POINTS_PER_LIST`` per PQ centroid and
    per list: ``nlist`` is lowered to fit); with fewer it falls back to
    flat and says so in ``reason``. ``pq_m`` that does not divide ``dim`` is a ``ValueError``.
    """
    kind = settings.kind
    if kind == "auto":
        if n < settings.threshold:
            return IndexSpec("flat", reason=f"auto: {n} vectors < threshold {settings.threshold}")
        kind = settings.large_kind
        reason = f"auto: {n} vectors >= threshold {settings.threshold}"
    else:
        reason = f"configured: {kind}"
    if kind == "flat":
        return IndexSpec("flat", reason=reason)
    if kind == "hnsw":
        params = {
            "M": settings.hnsw_m,
            "efConstruction": settings.hnsw_ef_construction,
            "efSearch": settings.hnsw_ef_search,
        }
        return IndexSpec("hnsw", params, reason)
    if dim % settings.pq_m:
        raise ValueError(f"index pq_m ({settings.pq_m}) must divide the dimension ({dim})")
    if n < PQ_CENTROIDS * MIN_POINTS_PER_LIST:
        return IndexSpec("flat", reason=f"{reason}, but {n} vectors are too few to train PQ")
    nlist = max(1, min(settings.ivf_nlist, n // MIN_POINTS_PER_LIST))
    params = {
        "nlist": nlist,
        "nprobe": min(settings.ivf_nprobe, nlist),
        "pq_m": settings.pq_m,
        "pq_bits": 8,
    }
    return IndexSpec("ivfpq", params, reason)


def _base_index(dim: int, spec: IndexSpec, vectors: np.ndarray) -> Any:
    """The untrained-then-trained inner index of ``spec`` (before ids are attached)."""
    if spec.kind == "flat":
        return faiss.IndexFlatIP(dim)
    if spec.kind == "hnsw":
        hnsw = faiss.IndexHNSWFlat(dim, spec.params["M"], faiss.METRIC_INNER_PRODUCT)
        hnsw.hnsw.efConstruction = spec.params["efConstruction"]
        hnsw.hnsw.efSearch = spec.params["efSearch"]
        return hnsw
    quantizer = faiss.IndexFlatIP(dim)
    ivf = faiss.IndexIVFPQ(
        quantizer,
        dim,
        spec.params["nlist"],
        spec.params["pq_m"],
        spec.params["pq_bits"],
        faiss.METRIC_INNER_PRODUCT,
    )
    ivf.nprobe = spec.params["nprobe"]
    sample = vectors
    most = max(PQ_CENTROIDS, spec.params["nlist"]) * 64  # enough for both k-means
    if len(vectors) > most:
        rows = np.random.default_rng(0).choice(len(vectors), most, replace=False)
        sample = vectors[np.sort(rows)]
    ivf.train(sample)
    return ivf


def build_index(vectors: np.ndarray, ids: np.ndarray, spec: IndexSpec) -> Any:
    """An ``IndexIDMap`` over the index ``spec`` names, holding ``vectors`` under ``ids``."""
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"vectors must be a 2-d array, got shape {matrix.shape}")
    id_array = np.ascontiguousarray(ids, dtype=np.int64)
    if id_array.shape != (matrix.shape[0],):
        raise ValueError(f"{matrix.shape[0]} vectors but {id_array.shape[0]} ids")
    index = faiss.IndexIDMap(_base_index(matrix.shape[1], spec, matrix))
    if len(matrix):
        index.add_with_ids(matrix, id_array)
    return index


def search_parameters(spec: IndexSpec, selector: Any | None = None) -> Any:
    """The ``params`` of one search of an index built from ``spec``: its efSearch or nprobe,
    and ``selector`` (an ``faiss.IDSelector`` over chunk ids) when a filter applies."""
    extra: dict[str, Any] = {} if selector is None else {"sel": selector}
    if spec.kind == "hnsw":
        return _faiss.SearchParametersHNSW(efSearch=spec.params["efSearch"], **extra)
    if spec.kind == "ivfpq":
        return _faiss.SearchParametersIVF(nprobe=spec.params["nprobe"], **extra)
    return _faiss.SearchParameters(**extra) if extra else None


def gpu_decision(
    spec: IndexSpec,
    *,
    wanted: bool,
    num_gpus: int | None = None,
    has_gpu_support: bool | None = None,
) -> tuple[bool, str]:
    """Whether an index of ``spec`` goes to a GPU, and why (or why not). ``num_gpus`` and
    ``has_gpu_support`` default to what this process's faiss reports."""
    if not wanted:
        return False, "cpu: the GPU is switched off (RAGTIME_INDEX_USE_GPU=false)"
    if has_gpu_support is None:
        has_gpu_support = hasattr(faiss, "StandardGpuResources")
    if not has_gpu_support:
        return False, "cpu: this faiss has no GPU support (install faiss-gpu)"
    if num_gpus is None:
        num_gpus = faiss.get_num_gpus()
    if num_gpus < 1:
        return False, "cpu: no CUDA device visible"
    if spec.kind == "hnsw":
        return False, "cpu: FAISS has no GPU HNSW"
    return True, f"gpu: {num_gpus} CUDA device(s)"


_gpu_resources: Any = None


def to_device(index: Any, spec: IndexSpec, *, wanted: bool) -> tuple[Any, str]:
    """``index`` on GPU 0 when ``gpu_decision`` says so, else itself; with the decision's
    reason (``cpu: ...`` or ``gpu: ...``)."""
    on_gpu, reason = gpu_decision(spec, wanted=wanted)
    if not on_gpu:
        return index, reason
    global _gpu_resources
    if _gpu_resources is None:
        _gpu_resources = faiss.StandardGpuResources()
    return faiss.index_cpu_to_gpu(_gpu_resources, 0, index), reason


def timed_build(vectors: np.ndarray, ids: np.ndarray, spec: IndexSpec) -> tuple[Any, float]:
    """``build_index`` and the seconds it took (for benches and the manifest)."""
    start = time.perf_counter()
    index = build_index(vectors, ids, spec)
    return index, time.perf_counter() - start
