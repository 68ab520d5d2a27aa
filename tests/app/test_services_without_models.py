"""``create_app(services=...)``: an app built from doubles answers without loading a model."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.auth import KeyStore
from app.main import create_app
from app.moderation import Moderator
from app.services import Services
from retrieval import DocumentStore, Reranker, ingest_path
from tests.fakes.backends import ScriptedBackend
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import app_state, make_settings


def test_an_app_of_doubles_answers_and_loads_no_model(tmp_path: Path, corpus_dir: Path) -> None:
    settings = make_settings(tmp_path)
    embedder = HashEmbedder()
    store = DocumentStore(settings.store_path)
    store.open()
    report = ingest_path(corpus_dir, collection="demo", embedder=embedder, store=store)
    store.close()
    assert report.chunks > 0 and not report.failures
    keys = KeyStore(settings.keys_path)
    _, secret = keys.create("tests")
    keys.close()
    services = Services(
        settings=settings,
        keys=KeyStore(settings.keys_path),
        store=DocumentStore(settings.store_path),
        embedder=embedder,
        reranker=Reranker(None),
        backend=ScriptedBackend(),
        moderator=Moderator(settings.moderation_threshold),
    )
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
