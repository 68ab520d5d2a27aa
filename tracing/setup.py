"""OpenTelemetry wiring: one tracer provider per process, with its processors and exporters.

Stage code only calls ``trace.get_tracer(__name__)``; this module is the one place that decides
where spans go. The standard ``OTEL_*`` variables apply: with ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set, spans are batched to that OTLP/HTTP endpoint;
``OTEL_TRACES_EXPORTER=console`` prints them; otherwise spans are still recorded, and feed the
per-request timings, but are not exported.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

log = logging.getLogger(__name__)

_provider: TracerProvider | None = None


def _exporter_processors() -> list[SpanProcessor]:
    names = {n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()}
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    processors: list[SpanProcessor] = []
    if "none" in names:
        return processors
    if endpoint or "otlp" in names:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processors.append(BatchSpanProcessor(OTLPSpanExporter()))
        log.info("exporting spans over OTLP/HTTP to %s", endpoint or "the default endpoint")
    if "console" in names:
        processors.append(BatchSpanProcessor(ConsoleSpanExporter()))
    return processors


def configure_tracing(
    service_name: str = "ragtime", *, processors: Iterable[SpanProcessor] = ()
) -> TracerProvider:
    """Install the process's tracer provider once; later calls only add ``processors``."""
    global _provider
    if _provider is None:
        name = os.environ.get("OTEL_SERVICE_NAME", service_name)
        # No atexit shutdown: it would wait on an unreachable collector without a bound;
        # ``shutdown_tracing`` (called by ``ragtime serve``) bounds it.
        _provider = TracerProvider(
            resource=Resource.create({SERVICE_NAME: name}), shutdown_on_exit=False
        )
        for processor in _exporter_processors():
            _provider.add_span_processor(processor)
        trace.set_tracer_provider(_provider)
    for processor in processors:
        _provider.add_span_processor(processor)
    return _provider


def flush_tracing(timeout_s: float = 1.0) -> None:
    """Export what is queued, waiting at most ``timeout_s`` (called when an app stops), in a
    daemon thread: an exporter retrying an unreachable collector cannot hold the caller longer."""
    if _provider is not None:
        _bounded(lambda: _provider.force_flush(int(timeout_s * 1000)), "flush", timeout_s)


def shutdown_tracing(timeout_s: float = 2.0) -> None:
    """Shut the provider down when the process is done: its processors export what is queued and
    close their exporters. Waits at most ``timeout_s``: the shutdown runs in a daemon thread, so
    an exporter stuck on an unreachable collector cannot hold the process. Final: spans recorded
    afterwards are no longer exported.
    """
    if _provider is not None:
        _bounded(_provider.shutdown, "shut down", timeout_s)


def _bounded(work: Callable[[], object], what: str, timeout_s: float) -> None:
    worker = threading.Thread(target=work, name=f"otel-{what}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        log.warning("tracing did not %s within %g s; queued spans may be lost", what, timeout_s)


def current_trace_id() -> str:
    """The W3C trace id of the current span, as 32 hex digits ("" when none is recording)."""
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else ""
