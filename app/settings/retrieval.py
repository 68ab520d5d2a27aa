"""How passages are made and found: the embedding model, chunking, search, rerank, snapshots and
the FAISS index kinds (``RAGTIME_INDEX_*``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from retrieval.search.index_types import IndexSettings

#: How a search finds passages: by vector (``dense``), by BM25 over their words (``keyword``), or
#: both fused by reciprocal rank (``hybrid``).
SearchMode = Literal["dense", "keyword", "hybrid"]


class RetrievalSettings(BaseModel):
    """Embedding, chunking, search, rerank, snapshots and indexes."""

    embedding_model: str | None = Field(None, description="Id or path; empty = shipped MiniLM.")
    # onnx: the same vectors as torch (cosine 1.0000 on 200 demo chunks), 2x its batch
    # throughput and a fraction of its one-question latency; onnx-int8 is faster still (1.49
    # against 3.35 ms a question) and scored nDCG@10 0.730 against fp32's 0.723 on the whole
    # Python FAQ evaluation, though its cosine to torch is 0.985 (BENCHMARKS.md, bench/embed.py).
    embedding_backend: Literal["torch", "onnx", "onnx-int8"] = Field(
        "onnx-int8",
        description="The backend new collections are embedded with: torch "
        "(sentence-transformers), or ONNX Runtime on the model's own export, fp32 or int8 "
        "weights. An existing collection keeps the backend that built it (its questions, "
        "attribution and later ingests use it) until rebuilt with `ragtime ingest --rebuild`.",
    )
    embedding_cache_dir: Path | None = Field(
        None, description="Where ONNX exports are written (once); empty = <data_dir>/models."
    )
    # Ingest chunking: sizes in tokens of the embedding model's own tokenizer, the heading line
    # embedded above each chunk included (retrieval/ingest/chunking.py; measured in BENCHMARKS.md).
    chunk_tokens: int = Field(
        256, ge=16, le=8192, description="Largest chunk, in embedding-model tokens."
    )
    chunk_overlap_tokens: int = Field(
        32, ge=0, le=4096, description="Tokens a chunk repeats from the one before it."
    )
    reranker_model: str | None = Field(None, description="Cross-encoder id or path; empty = none.")
    rerank_candidates: int = Field(20, ge=1, le=200, description="Passages scored by rerank.")
    rerank_batch_size: int = Field(
        8,
        ge=1,
        le=200,
        description="Candidates scored together: rerank scores batches best-first while the "
        "next one fits its share of the budget, then keeps the found order for the rest.",
    )
    top_k: int = Field(4, ge=1, le=50, description="Passages given to the prompt by default.")
    # Measured with `ragtime eval retrieval` on the Python FAQ and keyword sets
    # (docs/studies/retrieval.md, "Hybrid retrieval"): the mode that did best on both together.
    search_mode: SearchMode = Field(
        "hybrid",
        description="How /v1/ask (and /v1/search without `mode`) finds passages: dense "
        "vectors, BM25 keywords, or both fused by reciprocal rank (k=60).",
    )
    max_top_k: int = Field(20, ge=1, le=200)

    # Snapshots and indexes (retrieval/store/document_store.py, retrieval/search/index_types.py).
    max_search_k: int = Field(
        100, ge=1, le=10_000, description="Largest k of /v1/search (apart from max_top_k)."
    )
    snapshot_keep: int = Field(3, ge=1, le=100, description="Snapshots kept per collection.")
    snapshot_poll_s: float = Field(
        1.0, ge=0.0, le=3600.0, description="Seconds between checks for a newer snapshot; 0: off."
    )
    index_kind: Literal["auto", "flat", "hnsw", "ivfpq"] = "auto"
    index_threshold: int = Field(50_000, ge=1, description="auto: flat below this many chunks.")
    index_large_kind: Literal["hnsw", "ivfpq"] = "hnsw"
    index_hnsw_m: int = Field(32, ge=4, le=256)
    index_hnsw_ef_construction: int = Field(80, ge=8, le=4096)
    # 128: the smallest of 16/32/64/128 with recall@10 >= 0.95 at 1M vectors, p50 0.46 ms on one
    # core (docs/studies/retrieval.md, FAISS index types); 64 gave 0.93 there.
    index_hnsw_ef_search: int = Field(128, ge=1, le=4096)
    index_ivf_nlist: int = Field(1024, ge=1, le=1 << 20)
    index_ivf_nprobe: int = Field(16, ge=1, le=1 << 20)
    index_pq_m: int = Field(48, ge=1, le=384)
    index_use_gpu: bool = Field(True, description="Index on a GPU when CUDA and faiss-gpu are.")

    def _check_chunk_overlap(self) -> None:
        """Run by ``Settings``' validator."""
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            raise ValueError(
                f"chunk_overlap_tokens ({self.chunk_overlap_tokens}) must be less than "
                f"chunk_tokens ({self.chunk_tokens})"
            )

    @property
    def index_settings(self) -> IndexSettings:
        """The ``RAGTIME_INDEX_*`` settings as ``retrieval.search.index_types`` takes them."""
        from retrieval.search.index_types import IndexSettings

        return IndexSettings(
            kind=self.index_kind,
            threshold=self.index_threshold,
            large_kind=self.index_large_kind,
            hnsw_m=self.index_hnsw_m,
            hnsw_ef_construction=self.index_hnsw_ef_construction,
            hnsw_ef_search=self.index_hnsw_ef_search,
            ivf_nlist=self.index_ivf_nlist,
            ivf_nprobe=self.index_ivf_nprobe,
            pq_m=self.index_pq_m,
            use_gpu=self.index_use_gpu,
        )
