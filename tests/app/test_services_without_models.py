"""``create_app(services=...)``: an app built from doubles answers without loading a model."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.main import create_app
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import (
    app_state,
    create_key,
    make_settings,
    seed_data_dir,
    services_of_doubles,
)


def test_an_app_of_doubles_answers_and_loads_no_model(tmp_path: Path, corpus_dir: Path) -> None:
    settings = make_settings(tmp_path)
    seed_data_dir(settings.data_dir, corpus_dir, HashEmbedder())
    secret = create_key(settings.data_dir)
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
    assert app_state(client).services is services
