"""Retrieval for ragtime: chunk and ingest documents, embed them, search FAISS, rerank.

``ingest_path`` reads files of many formats (``retrieval.formats``), chunks them by model tokens
and publishes a collection's next snapshot in a ``DocumentStore`` (versioned snapshot
directories of SQLite + FAISS, swapped atomically) using an ``Embedder``; at query time the app
embeds the question, calls ``DocumentStore.search`` (with an optional ``SearchFilter``; its
BM25 twin ``keyword_search``, fused by ``rrf_fuse`` for hybrid search) and,
when a cross-encoder is loaded, ``Reranker.rerank``. ``IndexSettings`` choose each snapshot's
FAISS index by its size. Errors carry the HTTP status the app answers with.
"""

from retrieval.embedding.embedder import Embedder, default_embedding_model_path
from retrieval.embedding.embedders import Embedders
from retrieval.errors import (
    BrokenIndex,
    EmbeddingMismatch,
    InvalidFilter,
    LimitExceeded,
    NoTextLayer,
    NothingToIngest,
    RerankerUnavailable,
    RetrievalError,
    UnknownCollection,
    UnreadableDocument,
)
from retrieval.formats import SUPPORTED_SUFFIXES, ParseLimits
from retrieval.ingest.chunking import Chunk, chunk_text
from retrieval.ingest.folder import ingest_path, iter_documents, require_documents
from retrieval.ingest.report import IngestProgress, IngestReport
from retrieval.rerank.reranker import Reranker, RerankResult, RerankRound
from retrieval.search.filters import SearchFilter
from retrieval.search.fusion import RRF_K, fuse_passages, keyword_weight, rrf_fuse
from retrieval.search.index_types import IndexSettings, IndexSpec
from retrieval.search.passages import KeywordInfo, Passage, SearchInfo
from retrieval.store.document_store import DocumentStore

__all__ = [
    "RRF_K",
    "SUPPORTED_SUFFIXES",
    "BrokenIndex",
    "Chunk",
    "DocumentStore",
    "Embedder",
    "Embedders",
    "EmbeddingMismatch",
    "IndexSettings",
    "IndexSpec",
    "IngestProgress",
    "IngestReport",
    "InvalidFilter",
    "KeywordInfo",
    "LimitExceeded",
    "NoTextLayer",
    "NothingToIngest",
    "ParseLimits",
    "Passage",
    "RerankResult",
    "RerankRound",
    "Reranker",
    "RerankerUnavailable",
    "RetrievalError",
    "SearchFilter",
    "SearchInfo",
    "UnknownCollection",
    "UnreadableDocument",
    "chunk_text",
    "default_embedding_model_path",
    "fuse_passages",
    "ingest_path",
    "iter_documents",
    "keyword_weight",
    "require_documents",
    "rrf_fuse",
]
