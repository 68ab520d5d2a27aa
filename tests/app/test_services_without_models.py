"""``create_app(services=...)``: an app built from doubles answers without loading a model."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.main import create_app
from tests.helpers.app import create_key, ingest_with_doubles, make_settings, services_of_doubles


def test_an_app_of_doubles_answers_and_loads_no_model(tmp_path: Path, corpus_dir: Path) -> None:
    settings = make_settings(tmp_path)
    ingest_with_doubles(settings, corpus_dir)
    secret = create_key(settings)
    services = services_of_doubles(settings)
    with TestClient(create_app(services=services)) as client:
        ready = client.get("/readyz").json()
        response = client.post(
            "/v1/ask",
            json={"question": "How do I define a function with default values?"},
            headers={"Authorization": f"Bearer {secret}"},
        )
    assert ready["components"]["embedder"] == "loaded: hash-embedder"
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answer"] and body["citations"]
    assert client.app.state.services is services  # type: ignore[attr-defined]
