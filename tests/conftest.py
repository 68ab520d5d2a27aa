"""Shared fixtures: offline models, no network beyond loopback, one in-memory span exporter."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Spans are checked in memory here; a test of OTLP export sets its own endpoint.
os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
os.environ.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)

import socket
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

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
