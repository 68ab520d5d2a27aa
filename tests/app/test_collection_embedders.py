"""Each collection keeps the embedding backend that built it (issue 22 §2): new collections get
the configured one (int8 by default), an existing one is searched, attributed and added to with
an embedder of its own backend, made and loaded by the service, with no 409 and no rebuild."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.pipeline import services as services_module
from app.pipeline.services import Services
from retrieval import DocumentStore, Embedders, EmbeddingMismatch
from tests.fakes.backends import ScriptedBackend
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import DEMO_CORPUS, SUBSET, create_key, make_settings, seed_data_dir
from tracing.budget import CostModel


class BackendHashEmbedder(HashEmbedder):
    """``HashEmbedder`` whose int8 vectors differ from its fp32 ones (rolled), as real ones do:
    searching one backend's index with the other's vectors finds the wrong passages."""

    def __init__(self, backend: str) -> None:
        super().__init__()
        self.backend = backend  # type: ignore[assignment]
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        vectors = super().embed(texts)
        return np.roll(vectors, 7, axis=1) if self.backend == "onnx-int8" else vectors


def test_one_embedder_per_kind_of_vectors() -> None:
    made: list[str] = []

    def make(backend: str) -> BackendHashEmbedder:
        made.append(backend)
        return BackendHashEmbedder(backend)

    default = BackendHashEmbedder("onnx")
    embedders = Embedders(default, make)
    assert embedders.for_backend("torch") is default  # the same vectors as onnx
    int8 = embedders.for_backend("onnx-int8")
    assert embedders.for_backend("onnx-int8") is int8 and made == ["onnx-int8"]
    assert embedders.all() == [default, int8]
    with pytest.raises(EmbeddingMismatch, match="'onnx-int8'"):
        Embedders(default).for_backend("onnx-int8")


@pytest.fixture
def torch_demo(tmp_path: Path) -> Path:
    """A data dir whose ``demo`` collection was built by the torch backend."""
    corpus = tmp_path / "corpus"
    for name in SUBSET:
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        (corpus / name).write_bytes((DEMO_CORPUS / name).read_bytes())
    return seed_data_dir(tmp_path / "data", corpus, BackendHashEmbedder("torch"))


@pytest.mark.process
def test_an_existing_collection_keeps_its_backend_and_a_new_one_gets_int8(
    torch_demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        services_module, "default_embedder", lambda s: BackendHashEmbedder(s.embedding_backend)
    )
    settings = make_settings(torch_demo)
    assert settings.embedding_backend == "onnx-int8"  # the default for new collections
    services = Services.build(settings, backend=ScriptedBackend(), costs=CostModel())
    auth = {"Authorization": f"Bearer {create_key(torch_demo)}"}
    question = {"query": "How do I catch an exception?", "collection": "demo"}
    with TestClient(create_app(services=services)) as client:
        assert services.embedders is not None
        loaded = {e.backend: e.loaded for e in services.embedders.all()}
        assert loaded == {"onnx-int8": True, "torch": True}  # demo's own, loaded at start
        hits = client.post("/v1/search", json=question, headers=auth)
        assert hits.status_code == 200, hits.text
        assert hits.json()["passages"][0]["source"] == "tutorial/errors.rst.txt"
        notes = {"source": "tea.md", "text": "# Tea\n\nGreen tea steeps for two minutes."}
        fresh = client.post("/v1/collections/fresh/documents", json=notes, headers=auth)
        assert fresh.status_code == 201, fresh.text
        more = client.post("/v1/collections/demo/documents", json=notes, headers=auth)
        assert more.status_code == 201, more.text
        tea = client.post(
            "/v1/search", json={"query": "green tea", "collection": "fresh"}, headers=auth
        )
        assert tea.json()["passages"][0]["source"] == "tea.md"
        asked = client.post(
            "/v1/ask", json={"question": question["query"], "collection": "demo"}, headers=auth
        )
        assert asked.status_code == 200, asked.text
    store = DocumentStore(settings.store_path)
    store.open()
    try:
        assert store.embedding_backend_of("demo") == "torch"
        assert store.embedding_backend_of("fresh") == "onnx-int8"
        assert "tea.md" in store.sources("demo")
    finally:
        store.close()


def test_without_its_embedder_a_collection_of_other_vectors_is_refused(
    torch_demo: Path,
) -> None:
    """A service given one embedder (no way to make another) says what is wrong: 409."""
    services = Services.build(
        make_settings(torch_demo),
        backend=ScriptedBackend(),
        embedder=BackendHashEmbedder("onnx-int8"),
        costs=CostModel(),
    )
    auth = {"Authorization": f"Bearer {create_key(torch_demo)}"}
    body: dict[str, Any] = {"query": "exceptions", "collection": "demo"}
    with TestClient(create_app(services=services), raise_server_exceptions=False) as client:
        response = client.post("/v1/search", json=body, headers=auth)
    assert response.status_code == 409, response.text
    assert "'torch'" in response.json()["error"]["message"]
