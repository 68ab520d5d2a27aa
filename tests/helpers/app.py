"""Builders for app tests: settings for a data dir, a seeded data dir, services made of doubles,
and the app (running behind a test client, an async client that streams request bodies, or built
for a test that serves it itself).

The app's embedder must be the one that embedded the data dir's index: the tests' default is
``tests/fakes/hash_embedder.HashEmbedder`` (no model, no torch), as ``seeded_data_dir`` uses;
a test of the real models passes ``embedder=Embedder()`` with a MiniLM-seeded dir. A mismatch
fails loudly: the store refuses a query vector whose dimension is not its index's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.datastructures import State

from app.frontdoor.protocol import AdmittingProtocol
from app.frontdoor.server import GracefulServer
from app.keys.auth import SCOPES, KeyStore
from app.main import create_app
from app.pipeline.budget_engine import cost_model
from app.pipeline.services import Services
from app.safety.moderation import Moderator
from app.settings import Settings
from inference import GenerationBackend
from retrieval import DocumentStore, Embedder, Reranker, ingest_path
from tests.fakes.backends import ScriptedBackend
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.ports import free_port

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "demo" / "corpus"
#: The part of the demo corpus that the app and bench tests ingest (``seeded_data_dir``).
SUBSET = (
    "tutorial/controlflow.rst.txt",
    "tutorial/datastructures.rst.txt",
    "tutorial/errors.rst.txt",
    "tutorial/modules.rst.txt",
)


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Settings for ``data_dir`` that read no ``.env`` file, with ``overrides`` applied. No TTFT
    target unless a test sets one: whether a plan meets it depends on the machine's speed. The
    model writes every answer and none abstains unless a test says (``answer_mode``,
    ``answerable_min_similarity``): the abstention threshold is calibrated for MiniLM, and most
    tests embed with the hash embedder."""
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "max_output_tokens": 48,
        "ttft_target_ms": 0,
        "answer_mode": "generate",
        "answerable_min_similarity": -1.0,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


def seed_data_dir(data_dir: Path, corpus: Path, embedder: Embedder) -> Path:
    """Ingest ``corpus`` into ``data_dir``'s ``demo`` collection with ``embedder`` (loaded here);
    returns ``data_dir``."""
    embedder.load()
    store = DocumentStore(make_settings(data_dir).store_path)
    store.open()
    try:
        report = ingest_path(corpus, collection="demo", embedder=embedder, store=store)
    finally:
        store.close()
    assert report.files and not report.skipped and not report.failures, report
    return data_dir


def seed_files(data_dir: Path, corpus: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (relative name to text) under ``corpus`` and ingest them into
    ``data_dir``'s ``demo`` collection with the hash embedder; returns ``data_dir``."""
    for name, body in files.items():
        (corpus / name).parent.mkdir(parents=True, exist_ok=True)
        (corpus / name).write_text(body)
    return seed_data_dir(data_dir, corpus, HashEmbedder())


def create_key(
    data_dir: Path,
    name: str = "tests",
    *,
    scopes: Iterable[str] = SCOPES,
    collections: Iterable[str] | None = None,
) -> str:
    """The secret of a new API key in ``data_dir``: every scope on every collection, unless
    ``scopes`` and ``collections`` say less."""
    keys = KeyStore(make_settings(data_dir).keys_path)
    try:
        _, secret = keys.create(name, scopes=scopes, collections=collections)
    finally:
        keys.close()
    return secret


def build_app(
    data_dir: Path,
    *,
    backend: GenerationBackend | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    **overrides: Any,
) -> FastAPI:
    """The app over ``data_dir`` (not started): the configured components, except ``backend``
    and ``reranker`` when given, and ``embedder`` (a ``HashEmbedder`` unless given)."""
    settings = make_settings(data_dir, **overrides)
    services = Services.build(
        settings,
        backend=backend,
        embedder=embedder if embedder is not None else HashEmbedder(),
        reranker=reranker,
        costs=cost_model(settings),
    )
    return create_app(services=services)


@contextmanager
def running_app(
    data_dir: Path,
    *,
    backend: GenerationBackend | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    **overrides: Any,
) -> Iterator[TestClient]:
    """``build_app(...)`` started and stopped around the block, behind a test client."""
    app = build_app(data_dir, backend=backend, embedder=embedder, reranker=reranker, **overrides)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def app_state(client: TestClient) -> State:
    """The running app's state (its services, pipeline, alert evaluator)."""
    app = client.app
    assert isinstance(app, FastAPI), "the test client drives a FastAPI app"
    return app.state


def services_of_doubles(
    settings: Settings, *, backend: GenerationBackend | None = None
) -> Services:
    """Every component from doubles, over a data dir seeded with the hash embedder: the hash
    embedder, no cross-encoder, a scripted backend unless ``backend`` is given."""
    return Services(
        settings=settings,
        keys=KeyStore.for_settings(settings),
        store=DocumentStore(settings.store_path),
        embedder=HashEmbedder(),
        reranker=Reranker(None),
        backend=backend or ScriptedBackend(),
        moderator=Moderator(settings.moderation_threshold),
        costs=cost_model(settings),
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


@contextmanager
def uvicorn_serving(
    app: FastAPI, *, read_ahead: bool = True, **options: Any
) -> Iterator[uvicorn.Server]:
    """``app`` served by uvicorn in a thread on a free port of 127.0.0.1 (its URL:
    ``base_url(server)``), for what only a real connection shows; stopped after the block.
    It parses and admits as ``ragtime serve`` does (``AdmittingProtocol``) and stops as it
    does (``GracefulServer``, its requests read ahead of the loop unless ``read_ahead`` is off),
    without the exit's watchdog. ``options``: more of uvicorn's ``Config``."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=free_port(),
        log_level="warning",
        http=AdmittingProtocol,
        **options,
    )
    server = GracefulServer(config, read_ahead=read_ahead)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.serving.wait(0.05):  # listening, its read-ahead thread running
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
    try:
        yield server
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def base_url(server: uvicorn.Server) -> str:
    return f"http://{server.config.host}:{server.config.port}"


@contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """``uvicorn_serving(app)``: its base URL."""
    with uvicorn_serving(app) as server:
        yield base_url(server)
