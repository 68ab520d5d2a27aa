"""Tracing set-up: an app stopping flushes; the process ending shuts the provider down, bounded."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from tracing import setup


class Recording(SpanProcessor):
    """Counts flushes and shutdowns; a shutdown may hang until released."""

    def __init__(self, *, hang: bool = False) -> None:
        self.flushes = 0
        self.shutdowns = 0
        self.release = threading.Event()
        if not hang:
            self.release.set()

    def on_end(self, span: ReadableSpan) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.flushes += 1
        return True

    def shutdown(self) -> None:
        self.release.wait()
        self.shutdowns += 1


def provider_with(processor: SpanProcessor, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(processor)
    monkeypatch.setattr(setup, "_provider", provider)  # the session's provider comes back after


def test_flush_exports_and_keeps_the_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    processor = Recording()
    provider_with(processor, monkeypatch)
    setup.flush_tracing()
    assert (processor.flushes, processor.shutdowns) == (1, 0)


def test_shutdown_shuts_the_provider_down(monkeypatch: pytest.MonkeyPatch) -> None:
    processor = Recording()
    provider_with(processor, monkeypatch)
    setup.shutdown_tracing()
    assert processor.shutdowns == 1


def test_a_stuck_exporter_does_not_hold_the_shutdown(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    processor = Recording(hang=True)
    provider_with(processor, monkeypatch)
    started = time.monotonic()
    setup.shutdown_tracing(timeout_s=0.2)
    assert time.monotonic() - started < 2.0
    assert "did not shut down within 0.2 s" in caplog.text
    processor.release.set()  # let the daemon thread finish


def test_nothing_to_shut_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(setup, "_provider", None)
    setup.shutdown_tracing()
    setup.flush_tracing()
