"""App fixtures: a data dir seeded with part of the demo corpus, keys, and clients."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.auth import KeyStore
from app.config import Settings
from app.main import create_app
from inference import GenerationBackend
from retrieval import DocumentStore, Embedder, ingest_path

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "demo" / "corpus"
SUBSET = (
    "tutorial/controlflow.rst.txt",
    "tutorial/datastructures.rst.txt",
    "tutorial/errors.rst.txt",
    "tutorial/modules.rst.txt",
)


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"data_dir": data_dir, "max_output_tokens": 48}
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for name in SUBSET:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DEMO_CORPUS / name, root / name)
    return root


@pytest.fixture(scope="session")
def seeded_data_dir(tmp_path_factory: pytest.TempPathFactory, corpus_dir: Path) -> Path:
    data_dir = tmp_path_factory.mktemp("data")
    embedder = Embedder()
    embedder.load()
    store = DocumentStore(make_settings(data_dir).store_path)
    store.open()
    report = ingest_path(corpus_dir, collection="demo", embedder=embedder, store=store)
    store.close()
    assert report.files == len(SUBSET) and not report.failures
    return data_dir


@pytest.fixture(scope="session")
def api_key(seeded_data_dir: Path) -> str:
    keys = KeyStore(make_settings(seeded_data_dir).keys_path)
    _, secret = keys.create("tests")
    keys.close()
    return secret


@pytest.fixture(scope="session")
def auth(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


@contextmanager
def running_app(
    data_dir: Path, *, backend: GenerationBackend | None = None, **overrides: Any
) -> Iterator[TestClient]:
    app = create_app(make_settings(data_dir, **overrides), backend=backend)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="session")
def real_client(seeded_data_dir: Path, span_exporter: Any) -> Iterator[TestClient]:
    """The whole service with the real models: MiniLM, SmolLM2 via llama.cpp, the classifier."""
    with running_app(seeded_data_dir) as client:
        yield client
