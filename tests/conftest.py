"""Shared fixtures: offline models, no network beyond loopback, no SmolLM2 outside ``slow``
tests, one in-memory span exporter, and data dirs seeded with part of the demo corpus (each
with an API key) for the app and bench tests: ``seeded_data_dir`` embedded with a hashing
double, ``minilm_data_dir`` with the real MiniLM (for ``slow`` tests only)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Spans are checked in memory here; a test of OTLP export sets its own endpoint.
os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
os.environ.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)

import gc
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.helpers.network import NetworkGuard

# The app, retrieval, inference and tracing are imported by the fixtures that use them:
# pytest-xdist's controller imports this file before it starts any worker, and with them
# imported here that took 2.1 s instead of 0.2 s, a wait before every run on workers.
if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from inference import LlamaCppBackend


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


@pytest.fixture(scope="session", autouse=True)
def generator_loads() -> Iterator[list[str]]:
    """The models llama.cpp loaded (their paths) since the last test ended, its own fixtures'
    set-up included: ``no_real_generator`` checks them after each test."""
    from inference import LlamaCppBackend

    loads: list[str] = []
    real_load = LlamaCppBackend._load

    def recorded(backend: LlamaCppBackend) -> Any:
        loads.append(str(backend.model_path))
        return real_load(backend)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LlamaCppBackend, "_load", recorded)
        yield loads


@pytest.fixture(autouse=True)
def no_real_generator(request: pytest.FixtureRequest, generator_loads: list[str]) -> Iterator[None]:
    """Fail a test not marked ``slow`` that loads SmolLM2 through llama.cpp (in its own fixtures
    too): an app built with no ``backend=`` does, as configured, and a worker's first load costs
    seconds that a test of the plumbing does not need. Such a test passes a double
    (``tests/fakes/backends.py``)."""
    yield
    loaded, generator_loads[:] = list(generator_loads), []
    if loaded and not request.node.get_closest_marker("slow"):
        pytest.fail(
            f"loaded {', '.join(loaded)} with llama.cpp outside a slow test: pass backend= "
            "(tests/fakes/backends.py) or mark the test slow",
            pytrace=False,
        )


@pytest.fixture(scope="module", autouse=True)
def frozen_heap_of_earlier_modules() -> None:
    """Collect what earlier test modules left as garbage and freeze the rest (``gc.freeze``),
    as ``ragtime serve`` freezes its start-up heap (``app.frontdoor.heap``). A test worker's heap
    grows to about 800,000 objects; a full collection over it held the process for up to 555 ms
    (measured with ``gc.callbacks`` in a parallel ``make test``), long enough to break a test
    whose request has a budget of 700 ms. Frozen objects are skipped by later passes, so each
    module's collections walk only what that module made, and this collection only what the
    last one left."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session")
def span_exporter() -> InMemorySpanExporter:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tracing import configure_tracing

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
    from tests.helpers.app import DEMO_CORPUS, SUBSET

    root = tmp_path_factory.mktemp("corpus")
    for name in SUBSET:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DEMO_CORPUS / name, root / name)
    return root


@pytest.fixture(scope="session")
def seeded_data_dir(tmp_path_factory: pytest.TempPathFactory, corpus_dir: Path) -> Path:
    """A data dir whose ``demo`` collection holds ``corpus_dir``, embedded with ``HashEmbedder``
    (no model: it seeds in a fraction of a second). ``running_app`` and ``build_app`` embed
    questions with the same double by default, so searches rank passages by shared words."""
    from tests.fakes.hash_embedder import HashEmbedder
    from tests.helpers.app import seed_data_dir

    return seed_data_dir(tmp_path_factory.mktemp("data"), corpus_dir, HashEmbedder())


@pytest.fixture(scope="session")
def api_key(seeded_data_dir: Path) -> str:
    """The secret of a key created in ``seeded_data_dir``."""
    from tests.helpers.app import create_key

    return create_key(seeded_data_dir)


@pytest.fixture(scope="session")
def minilm_data_dir(tmp_path_factory: pytest.TempPathFactory, corpus_dir: Path) -> Path:
    """Like ``seeded_data_dir``, embedded with the real MiniLM (about 25 s on 2 cores): for the
    ``slow`` tests of the real models and of ``ragtime serve`` as a process."""
    from retrieval import Embedder
    from tests.helpers.app import seed_data_dir

    return seed_data_dir(tmp_path_factory.mktemp("data-minilm"), corpus_dir, Embedder())


@pytest.fixture(scope="session")
def minilm_api_key(minilm_data_dir: Path) -> str:
    """The secret of a key created in ``minilm_data_dir``."""
    from tests.helpers.app import create_key

    return create_key(minilm_data_dir)
