"""With a cross-encoder configured, the rerank stage runs, is traced and degrades nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.harness.tiny_cross_encoder import build_tiny_cross_encoder
from tests.fakes.backends import ScriptedBackend
from tests.fakes.rerankers import OverlapReranker
from tests.helpers.app import running_app
from tests.helpers.spans import attributes


def assert_reranked(
    client: TestClient, auth: dict[str, str], spans: InMemorySpanExporter, model: str
) -> None:
    """``model`` is loaded, and an answer's 3 citations are the best 3 of 8 candidates."""
    ready = client.get("/readyz", headers=auth).json()
    assert ready["components"]["reranker"] == f"loaded: {model}"
    response = client.post(
        "/v1/ask", json={"question": "What is a list?", "top_k": 3}, headers=auth
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["degradations"] == []
    scores = [c["rerank_score"] for c in body["citations"]]
    assert len(scores) == 3 and None not in scores
    assert scores == sorted(scores, reverse=True)
    rerank = next(s for s in spans.get_finished_spans() if s.name == "rerank")
    assert attributes(rerank)["ragtime.rerank.candidates"] == 8
    assert attributes(rerank)["ragtime.rerank.model"] == model
    assert "ragtime.degraded" not in attributes(rerank)


def test_rerank_scores_candidates_and_keeps_top_k(
    seeded_data_dir: Path, auth: dict[str, str], spans: InMemorySpanExporter
) -> None:
    reranker = OverlapReranker()
    with running_app(
        seeded_data_dir, backend=ScriptedBackend(), reranker=reranker, rerank_candidates=8
    ) as client:
        assert_reranked(client, auth, spans, "overlap-cross-encoder")
    assert reranker.cross_encoder.pairs_scored == 8


@pytest.mark.slow
def test_the_configured_cross_encoder_is_loaded_and_reranks(
    seeded_data_dir: Path,
    auth: dict[str, str],
    spans: InMemorySpanExporter,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """``reranker_model`` to a real (tiny, random) sentence-transformers cross-encoder, end to
    end. Slow: it imports torch and sentence-transformers (about 7 s on 2 cores); the fast test
    above runs the same stage over ``OverlapReranker``."""
    cross_encoder = build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"))
    with running_app(
        seeded_data_dir,
        backend=ScriptedBackend(),
        reranker_model=str(cross_encoder),
        rerank_candidates=8,
    ) as client:
        assert_reranked(client, auth, spans, str(cross_encoder))


def test_an_unloadable_cross_encoder_is_skipped_and_said(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    why = "cross-encoder 'no-such-org/no-such-model' could not be loaded: OSError: not cached"
    with running_app(
        seeded_data_dir, backend=ScriptedBackend(), reranker=OverlapReranker(load_error=why)
    ) as client:
        assert (
            client.get("/readyz", headers=auth).json()["components"]["reranker"]
            == f"skipped: {why}"
        )
        body = client.post("/v1/ask", json={"question": "What is a list?"}, headers=auth).json()
    (degradation,) = body["degradations"]
    assert degradation["action"] == "rerank_unavailable"
    assert "no-such-org/no-such-model" in degradation["reason"]
