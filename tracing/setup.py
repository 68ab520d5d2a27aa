"""OpenTelemetry wiring: one tracer provider per process, with its processors and exporters.

Stage code only calls ``trace.get_tracer(__name__)``; this module is the one place that decides
where spans go. The standard ``OTEL_*`` variables apply: with ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set, spans are batched to that OTLP/HTTP endpoint;
``OTEL_TRACES_EXPORTER=console`` prints them; otherwise spans are still recorded, and feed the
per-request timings, but are not exported.

Exporting never holds a stopping process for long (issue 13, finding 7): an OTLP export gives up
after ``EXPORT_TIMEOUT_S`` (unless ``OTEL_EXPORTER_OTLP_TIMEOUT`` or its traces variant says
otherwise), and ``flush_tracing`` and ``shutdown_tracing`` each wait at most their timeout, the
work running on a daemon thread, so that a collector that is down costs a shutdown about 2 s.
"""

from __future__ import annotations

import atexit
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
_shut_down: TracerProvider | None = None  # the provider shutdown_tracing was called for

#: Seconds one OTLP export may take, retries included, unless the OTEL_* variables say otherwise
#: (the SDK's default is 10 s, and a flush exports batch after batch).
EXPORT_TIMEOUT_S = 2.0
#: How long an app's stop waits for its spans to be exported, and a process's end for the rest.
FLUSH_TIMEOUT_S = 1.0
SHUTDOWN_TIMEOUT_S = 1.0


def _export_timeout_s() -> float | None:
    """``EXPORT_TIMEOUT_S``, unless an OTEL_* variable sets the exporter's (then None)."""
    if os.environ.get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_TIMEOUT"
    ):
        return None
    return EXPORT_TIMEOUT_S


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

        timeout_s = _export_timeout_s()
        processors.append(
            BatchSpanProcessor(
                OTLPSpanExporter(timeout=timeout_s),
                export_timeout_millis=None if timeout_s is None else timeout_s * 1000.0,
            )
        )
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
        # Shut down at exit by ``shutdown_tracing`` (bounded), not by the SDK's own hook.
        _provider = TracerProvider(
            resource=Resource.create({SERVICE_NAME: name}), shutdown_on_exit=False
        )
        atexit.register(shutdown_tracing)
        for processor in _exporter_processors():
            _provider.add_span_processor(processor)
        trace.set_tracer_provider(_provider)
    for processor in processors:
        _provider.add_span_processor(processor)
    return _provider


def flush_tracing(timeout_s: float = FLUSH_TIMEOUT_S) -> None:
    """Export what is queued, waiting at most ``timeout_s`` (called when an app stops)."""
    provider = _provider
    if provider is not None and provider is not _shut_down:
        _bounded(lambda: provider.force_flush(int(timeout_s * 1000)), timeout_s, "flush")


def shutdown_tracing(timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
    """Shut the provider down when the process is done: its processors export what is queued and
    close their exporters. Waits at most ``timeout_s``: the shutdown runs in a daemon thread, so
    an exporter stuck on an unreachable collector cannot hold the process. Final: spans recorded
    afterwards are no longer exported. Runs at exit too; only the first call does anything.
    """
    global _shut_down
    provider = _provider
    if provider is None or provider is _shut_down:
        return
    _shut_down = provider
    _bounded(provider.shutdown, timeout_s, "shut down")


def _bounded(work: Callable[[], object], timeout_s: float, what: str) -> None:
    """``work()`` on a daemon thread, waited for at most ``timeout_s``."""
    worker = threading.Thread(target=work, name=f"otel-{what.replace(' ', '')}", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        log.warning("tracing did not %s within %g s; queued spans may be lost", what, timeout_s)


def current_trace_id() -> str:
    """The W3C trace id of the current span, as 32 hex digits ("" when none is recording)."""
    ctx = trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else ""
