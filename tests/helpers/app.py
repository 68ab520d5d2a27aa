"""Builders for app tests: settings for a data dir, services made of doubles, and the app
running behind a test client (or an async client that streams request bodies)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.auth import KeyStore
from app.config import Settings
from app.main import create_app
from app.moderation import Moderator
from app.services import Services
from inference import GenerationBackend
from retrieval import DocumentStore, Reranker, ingest_path
from tests.fakes.backends import ScriptedBackend
from tests.fakes.hash_embedder import HashEmbedder

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "demo" / "corpus"
#: The part of the demo corpus that the app and bench tests ingest (``seeded_data_dir``).
SUBSET = (
    "tutorial/controlflow.rst.txt",
    "tutorial/datastructures.rst.txt",
    "tutorial/errors.rst.txt",
    "tutorial/modules.rst.txt",
)


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Settings for ``data_dir`` that read no ``.env`` file, with ``overrides`` applied."""
    values: dict[str, Any] = {"data_dir": data_dir, "max_output_tokens": 48}
    values.update(overrides)
    return Settings(_env_file=None, **values)


@contextmanager
def running_app(
    data_dir: Path, *, backend: GenerationBackend | None = None, **overrides: Any
) -> Iterator[TestClient]:
    """The app over ``data_dir`` (started and stopped around the block), behind a test client."""
    app = create_app(make_settings(data_dir, **overrides), backend=backend)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def ingest_with_doubles(settings: Settings, corpus: Path) -> None:
    """Ingest ``corpus`` into the ``demo`` collection of ``settings.data_dir`` with the hash
    embedder (no model), and create the data dir's key store."""
    store = DocumentStore(settings.store_path)
    store.open()
    report = ingest_path(corpus, collection="demo", embedder=HashEmbedder(), store=store)
    store.close()
    assert report.chunks > 0 and not report.failures


def create_key(settings: Settings, name: str = "tests") -> str:
    """The secret of a new key in ``settings.data_dir``."""
    keys = KeyStore(settings.keys_path)
    _, secret = keys.create(name)
    keys.close()
    return secret


def services_of_doubles(
    settings: Settings, *, backend: GenerationBackend | None = None
) -> Services:
    """Every component from doubles, over a data dir ``ingest_with_doubles`` filled: the hash
    embedder, no cross-encoder, a scripted backend unless ``backend`` is given."""
    return Services(
        settings=settings,
        keys=KeyStore(settings.keys_path),
        store=DocumentStore(settings.store_path),
        embedder=HashEmbedder(),
        reranker=Reranker(None),
        backend=backend or ScriptedBackend(),
        moderator=Moderator(settings.moderation_threshold),
    )


@asynccontextmanager
async def asgi_client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """``app`` started (its lifespan) behind an in-process async client.

    The client sends a request body chunk by chunk, as the app reads it (an async iterator body
    goes without Content-Length, unless the headers give one), and an exception that escapes the
    app becomes the 500 a server would answer.
    """
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://ragtime") as client:
            yield client
