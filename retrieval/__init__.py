"""Retrieval for ragtime: chunk and ingest documents, embed them, search FAISS, rerank.

``ingest_path`` reads files of many formats (``retrieval.formats``), chunks them by model tokens
and fills a ``DocumentStore`` (SQLite + FAISS) using an ``Embedder``; at query time the app
embeds the question, calls ``DocumentStore.search`` and, when a cross-encoder is loaded,
``Reranker.rerank``. Errors carry the HTTP status the app answers with.
"""

from retrieval.chunking import Chunk, chunk_text
from retrieval.embeddings import Embedder, default_embedding_model_path
from retrieval.errors import (
    BrokenIndex,
    EmbeddingMismatch,
    NoTextLayer,
    RerankerUnavailable,
    RetrievalError,
    UnknownCollection,
    UnreadableDocument,
)
from retrieval.formats import SUPPORTED_SUFFIXES
from retrieval.ingest import IngestProgress, IngestReport, ingest_path, iter_documents
from retrieval.rerank import Reranker, RerankResult
from retrieval.store import DocumentStore, Passage

__all__ = [
    "SUPPORTED_SUFFIXES",
    "BrokenIndex",
    "Chunk",
    "DocumentStore",
    "Embedder",
    "EmbeddingMismatch",
    "IngestProgress",
    "IngestReport",
    "NoTextLayer",
    "Passage",
    "RerankResult",
    "Reranker",
    "RerankerUnavailable",
    "RetrievalError",
    "UnknownCollection",
    "UnreadableDocument",
    "chunk_text",
    "default_embedding_model_path",
    "ingest_path",
    "iter_documents",
]
