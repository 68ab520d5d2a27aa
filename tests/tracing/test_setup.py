"""Tracing set-up: an app stopping flushes; the process ending shuts the provider down, bounded."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from tests.helpers.ports import free_port
from tracing import setup

ROOT = Path(__file__).resolve().parents[2]


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


SHUTDOWN_SCRIPT = """
import sys, time
from opentelemetry import trace
from tracing import configure_tracing, flush_tracing, shutdown_tracing
configure_tracing()
tracer = trace.get_tracer("load")
for i in range(3000):  # six batches of spans queued for a collector that is down
    with tracer.start_as_current_span(f"span{i}"):
        pass
time.sleep(0.5)  # the first export is under way
started = time.perf_counter()
flush_tracing()  # as an app stopping does
shutdown_tracing()  # as `ragtime serve` ending does
print(f"{time.perf_counter() - started:.3f}")
"""


@pytest.mark.process
def test_shutdown_with_the_collector_down_is_quick() -> None:
    """Issue 13, finding 7: with the OTLP collector down, flushing and shutting down after load
    took 33 s (the exporter's 10 s timeout, batch after batch); now about 2 s."""
    port = free_port()  # nothing listens there
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "PYTHONPATH": str(ROOT),
    }
    for name in ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"):
        env.pop(name, None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", SHUTDOWN_SCRIPT],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.split()[-1]) < 3.0
    # The process ends soon after: nothing waits on the exporter at exit.
    assert time.monotonic() - started < 30
