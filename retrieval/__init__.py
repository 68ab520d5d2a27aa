"""Retrieval for ragtime: chunk and ingest documents, embed them, search FAISS, rerank.

``ingest_path`` reads files of many formats (``retrieval.formats``), chunks them by model tokens
and publishes a collection's next snapshot in a ``DocumentStore`` (versioned snapshot
directories of SQLite + FAISS, swapped atomically) using an ``Embedder``; at query time the app
embeds the question, calls ``DocumentStore.search`` (with an optional ``SearchFilter``) and,
when a cross-encoder is loaded, ``Reranker.rerank``. ``IndexSettings`` choose each snapshot's
FAISS index by its size. Errors carry the HTTP status the app answers with.
"""

from retrieval.chunking import Chunk, chunk_text
from retrieval.embedders import Embedders
from retrieval.embeddings import Embedder, default_embedding_model_path
from retrieval.errors import (
    BrokenIndex,
    EmbeddingMismatch,
    InvalidFilter,
    LimitExceeded,
    NoTextLayer,
    RerankerUnavailable,
    RetrievalError,
    UnknownCollection,
    UnreadableDocument,
)
from retrieval.filters import SearchFilter
from retrieval.formats import SUPPORTED_SUFFIXES, ParseLimits
from retrieval.index_types import IndexSettings, IndexSpec
from retrieval.ingest import IngestProgress, IngestReport, ingest_path, iter_documents
from retrieval.passages import Passage, SearchInfo
from retrieval.rerank import Reranker, RerankResult
from retrieval.store import DocumentStore

__all__ = [
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
    "LimitExceeded",
    "NoTextLayer",
    "ParseLimits",
    "Passage",
    "RerankResult",
    "Reranker",
    "RerankerUnavailable",
    "RetrievalError",
    "SearchFilter",
    "SearchInfo",
    "UnknownCollection",
    "UnreadableDocument",
    "chunk_text",
    "default_embedding_model_path",
    "ingest_path",
    "iter_documents",
]
