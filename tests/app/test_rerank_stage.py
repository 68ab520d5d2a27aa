"""With a cross-encoder configured, the rerank stage runs, is traced and degrades nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.fakes.backends import ScriptedBackend
from tests.fakes.tiny_models import build_tiny_cross_encoder
from tests.helpers.app import running_app
from tests.helpers.spans import attributes


@pytest.fixture(scope="module")
def cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"))


def test_rerank_scores_candidates_and_keeps_top_k(
    seeded_data_dir: Path,
    cross_encoder: Path,
    auth: dict[str, str],
    spans: InMemorySpanExporter,
) -> None:
    with running_app(
        seeded_data_dir,
        backend=ScriptedBackend(),
        reranker_model=str(cross_encoder),
        rerank_candidates=8,
    ) as client:
        ready = client.get("/readyz").json()
        assert ready["components"]["reranker"] == f"loaded: {cross_encoder}"
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
    assert attributes(rerank)["ragtime.rerank.model"] == str(cross_encoder)
    assert "ragtime.degraded" not in attributes(rerank)


def test_an_unloadable_cross_encoder_is_skipped_and_said(
    seeded_data_dir: Path, auth: dict[str, str], tmp_path: Path
) -> None:
    with running_app(
        seeded_data_dir, backend=ScriptedBackend(), reranker_model="no-such-org/no-such-model"
    ) as client:
        reranker = client.get("/readyz").json()["components"]["reranker"]
        assert reranker.startswith("skipped: cross-encoder 'no-such-org/no-such-model'")
        body = client.post("/v1/ask", json={"question": "What is a list?"}, headers=auth).json()
    (degradation,) = body["degradations"]
    assert degradation["action"] == "rerank_skipped"
    assert "no-such-org/no-such-model" in degradation["reason"]
