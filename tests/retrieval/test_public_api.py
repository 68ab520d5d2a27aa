"""The names ``retrieval`` offers: what the app is written against."""

from __future__ import annotations

import retrieval

EXPORTED = {
    "RRF_K",
    "SUPPORTED_SUFFIXES",
    "Chunk",
    "DocumentStore",
    "Embedder",
    "BrokenIndex",
    "EmbeddingMismatch",
    "Embedders",
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
    "keyword_weight",
    "ingest_path",
    "iter_documents",
    "require_documents",
    "rrf_fuse",
}


def test_exported_names() -> None:
    assert set(retrieval.__all__) == EXPORTED
    assert all(hasattr(retrieval, name) for name in EXPORTED)


def test_error_statuses() -> None:
    assert retrieval.RetrievalError.status_code == 500
    assert retrieval.UnknownCollection.status_code == 404
    assert retrieval.RerankerUnavailable.status_code == 503
    assert retrieval.EmbeddingMismatch.status_code == 409
    assert retrieval.InvalidFilter.status_code == 422
    assert retrieval.UnreadableDocument.status_code == retrieval.NoTextLayer.status_code == 422
    assert issubclass(retrieval.NoTextLayer, retrieval.UnreadableDocument)
    assert issubclass(retrieval.EmbeddingMismatch, retrieval.RetrievalError)
    assert issubclass(retrieval.UnknownCollection, retrieval.RetrievalError)
    assert issubclass(retrieval.RerankerUnavailable, retrieval.RetrievalError)
    error = retrieval.UnknownCollection.named("nope", ["b", "a"])
    assert str(error) == "unknown collection 'nope'; known: ['a', 'b']"
    assert (error.collection, error.known) == ("nope", ["a", "b"])
    assert str(retrieval.UnknownCollection("plain message")) == "plain message"
