"""Shared fixtures: offline models, no network beyond loopback, one in-memory span exporter,
and a data dir seeded with part of the demo corpus (with an API key) for the app and bench tests."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Spans are checked in memory here; a test of OTLP export sets its own endpoint.
os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
os.environ.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.auth import KeyStore
from retrieval import DocumentStore, Embedder, ingest_path
from tests.helpers.app import DEMO_CORPUS, SUBSET, make_settings
from tests.helpers.network import NetworkGuard
from tracing import configure_tracing


@pytest.fixture(autouse=True)
def no_network(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[NetworkGuard | None]:
    """Fail any test that connects beyond loopback, unless it is marked ``network``."""
    if request.node.get_closest_marker("network"):
        yield None
        return
    guard = NetworkGuard()
    monkeypatch.setattr(socket.socket, "connect", guard.wrap(socket.socket.connect))
    monkeypatch.setattr(socket.socket, "connect_ex", guard.wrap(socket.socket.connect_ex))
    yield guard
    if guard.attempts:
        pytest.fail(f"connected beyond loopback: {', '.join(guard.attempts)}", pytrace=False)


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    configure_tracing(processors=[SimpleSpanProcessor(exporter)])
    return exporter


@pytest.fixture
def spans(span_exporter: InMemorySpanExporter) -> InMemorySpanExporter:
    """The exporter, emptied before the test."""
    span_exporter.clear()
    return span_exporter


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ``SUBSET``, part of the demo corpus."""
    root = tmp_path_factory.mktemp("corpus")
    for name in SUBSET:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DEMO_CORPUS / name, root / name)
    return root


@pytest.fixture(scope="session")
def seeded_data_dir(tmp_path_factory: pytest.TempPathFactory, corpus_dir: Path) -> Path:
    """A data dir whose ``demo`` collection holds ``corpus_dir``, embedded with the real MiniLM."""
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
    """The secret of a key created in ``seeded_data_dir``."""
    keys = KeyStore(make_settings(seeded_data_dir).keys_path)
    _, secret = keys.create("tests")
    keys.close()
    return secret
