"""Prometheus metrics: request counts and latencies, per-stage durations, TTFT, degradations.

Metrics live in one process-wide registry. ``RequestMetricsMiddleware`` (pure ASGI, so it never
buffers a streamed body) counts requests by route and status and observes their duration.

When ``ragtime serve`` runs several processes (``shared_metrics_dir``), each writes its values
to files in one directory (prometheus_client's multiprocess mode, ``PROMETHEUS_MULTIPROC_DIR``)
and ``/metrics`` answers, from whichever process takes the scrape, for all of them: counters and
histograms summed, each gauge as its ``multiprocess_mode`` says (the worst loop lag, the
requests in flight summed, per-process figures by ``pid``). Exemplars are not kept in that mode.
"""

from __future__ import annotations

import contextlib
import glob
import os
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import exposition as openmetrics
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracing.process_dirs import fresh_shared_dir

REGISTRY = CollectorRegistry(auto_describe=True)


_StageMetric = TypeVar("_StageMetric", Counter, Histogram)
_stage_children: dict[tuple[object, str], Any] = {}


def stage_child(metric: _StageMetric, stage: str) -> _StageMetric:
    """``metric.labels(stage=stage)``, looked up once: the ledger observes every stage of every
    request, and ``labels`` validates and locks on each call."""
    child = _stage_children.get((metric, stage))
    if child is None:
        child = _stage_children[(metric, stage)] = metric.labels(stage=stage)
    return child


#: Where each process of a several-process server writes its values (prometheus_client's name).
MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: Waits that should be milliseconds and become seconds under overload: the loop's lag, refusals.
_WAIT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
#: A refusal's, finer around its target (10 ms at p99, issue 22): a p99 read as the bound of its
#: bucket said 25 ms for anything from 10 to 25.
_REFUSAL_BUCKETS = (
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.0125, 0.015, 0.02, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip

LOOP_LAG_SECONDS = Gauge(
    "ragtime_event_loop_lag_seconds",
    "The largest lag of the event loop over the last quarter second, each halved for every 50 ms "
    "of its age: how late it runs what is due.",
    multiprocess_mode="livemax",
    registry=REGISTRY,
)
LOOP_LAG_MEASURED_SECONDS = Histogram(
    "ragtime_event_loop_lag_measured_seconds",
    "Each measurement of the event loop's lag (one every 10 ms): how late the loop woke a timer, "
    "so how long a request that reached the socket then waited before any code of ours ran.",
    buckets=_WAIT_BUCKETS,
    registry=REGISTRY,
)

HEAP_FROZEN_OBJECTS = Gauge(
    "ragtime_heap_frozen_objects",
    "Objects alive after start-up, frozen out of the garbage collector's full passes "
    "(RAGTIME_GC_FREEZE; 0 when off).",
    multiprocess_mode="liveall",
    registry=REGISTRY,
)

_LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip

REQUESTS = Counter(
    "ragtime_requests",
    "HTTP requests by route and status code.",
    ["route", "status"],
    registry=REGISTRY,
)
REQUEST_SECONDS = Histogram(
    "ragtime_request_duration_seconds",
    "Wall time of HTTP requests, streamed bodies included.",
    ["route"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
IN_FLIGHT = Gauge(
    "ragtime_requests_in_flight",
    "Requests being served now.",
    ["route"],
    multiprocess_mode="livesum",
    registry=REGISTRY,
)
STAGE_SECONDS = Histogram(
    "ragtime_stage_duration_seconds",
    "Wall time of each pipeline stage.",
    ["stage"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
TTFT_SECONDS = Histogram(
    "ragtime_ttft_seconds",
    "Time from request arrival to the first answer token.",
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
DEGRADATIONS = Counter(
    "ragtime_degradations",
    "Deliberate degradations by stage and action.",
    ["stage", "action"],
    registry=REGISTRY,
)
STAGE_BUDGET_EXCEEDED = Counter(
    "ragtime_stage_budget_exceeded",
    "Stage runs that overran the allocation the plan gave them (the ragtime.budget.exceeded "
    "of their span).",
    ["stage"],
    registry=REGISTRY,
)
REQUEST_OUTCOMES = Counter(
    "ragtime_request_outcomes",
    "Requests by outcome: ok, degraded, rejected, failed, deadline, cancelled.",
    ["route", "outcome"],
    registry=REGISTRY,
)
BUDGET_EXCEEDED = Counter(
    "ragtime_budget_exceeded",
    "Requests that broke their budget, each once, by how: late (it ended after its budget ran "
    "out) or 504 (it was answered 504 after admission: its deadline passed with its work still "
    "running, or no plan fit what retrieval left). A 504 refused at the door, for a budget no "
    "plan can meet, is a refusal (ragtime_admission_refused_total), not counted here.",
    ["route", "kind"],
    registry=REGISTRY,
)
REQUEST_BUDGET_SECONDS = Histogram(
    "ragtime_request_budget_seconds",
    "The budget each question request carried (its own, or the default): beside "
    "ragtime_request_duration_seconds, the time its callers gave it.",
    ["route"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
TTFT_TARGET_RATIO = Histogram(
    "ragtime_ttft_target_ratio",
    "Each answer's time to first token over its TTFT target (the request's ttft_target_ms, else "
    "RAGTIME_TTFT_TARGET_MS), for answers that had one: over 1, the first token came late.",
    ["route"],
    buckets=(0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0),
    registry=REGISTRY,
)
PREDICTION_ERROR_RATIO = Histogram(
    "ragtime_budget_prediction_error_ratio",
    "A stage's actual time over the budget engine's prediction for it (1 = exact).",
    ["stage"],
    buckets=(0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0),
    registry=REGISTRY,
)
ADMISSION_REFUSED = Counter(
    "ragtime_admission_refused",
    "Requests refused at once by admission control, by route and reason: overloaded "
    "(503: the process's or a generation pool's bound, or, at plan time before the engine, a "
    "wait at the target that leaves no room for the smallest answer), shutting_down (503), "
    "budget_infeasible (504: a budget below the smallest answer, refused before any work). "
    "Deliberate: the error-ratio alert leaves them out.",
    ["route", "reason"],
    registry=REGISTRY,
)
ADMISSION_REFUSAL_SECONDS = Histogram(
    "ragtime_admission_refusal_seconds",
    "How long a request refused at arrival (503) took, from its arrival to its refusal sent: "
    "a refusal must not wait behind the work it refuses.",
    buckets=_REFUSAL_BUCKETS,
    registry=REGISTRY,
)
REQUEST_SOCKET_WAIT_SECONDS = Histogram(
    "ragtime_request_socket_wait_seconds",
    "How long a request's bytes waited in the kernel before the server read them (from the "
    "kernel's stamp of their arrival, else the connection's TCP_INFO to a jiffy; ragtime serve "
    "only): in a burst, the queue before the loop gets to a connection.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
    registry=REGISTRY,
)
READ_AHEAD_REQUESTS = Counter(
    "ragtime_read_ahead_requests",
    "Requests read by the thread that reads connections ahead of the event loop "
    "(app.frontdoor.read_ahead; ragtime serve only), by what it did: refused (503 sent from that "
    "thread), admitted (handed to the loop with its ticket), passed (handed to the loop undecided: "
    "not a question the gate takes, or incomplete, pipelined or unparsable).",
    ["outcome"],
    registry=REGISTRY,
)
ADMISSION_REFUSAL_AFTER_READ_SECONDS = Histogram(
    "ragtime_admission_refusal_after_read_seconds",
    "How long a request refused at arrival (503) took from its headers being parsed (the "
    "server's read of it) to its refusal sent: the refusal's own delay, without the wait on the "
    "socket before the read (which ragtime_admission_refusal_seconds counts, as the loop's lag).",
    buckets=(0.0001, 0.00025, 0.0005, *_REFUSAL_BUCKETS),
    registry=REGISTRY,
)
COST_MODEL = Gauge(
    "ragtime_cost_model",
    "The budget engine's current costs: per generation target (term fixed_ms, "
    "prefill_ms_per_token, decode_ms_per_token) and per stage (term ms_per_unit), at its quantile.",
    ["target", "term"],
    multiprocess_mode="liveall",
    registry=REGISTRY,
)


COLLECTION_BROKEN = Gauge(
    "ragtime_collection_broken",
    "1 while a collection cannot be served (its index is damaged or unreadable), else 0",
    ["collection"],
    multiprocess_mode="livemax",
    registry=REGISTRY,
)


_COLLECTION_SERIES: set[str] = set()

#: How a request can end (``ragtime_request_outcomes_total``'s outcome label).
OUTCOMES = ("ok", "degraded", "rejected", "failed", "deadline", "cancelled")
#: How a request breaks its budget (``ragtime_budget_exceeded_total``'s kind label).
BUDGET_BREACHES = ("late", "504")
#: Why admission refuses a request (``ragtime_admission_refused_total``'s reason label).
REFUSALS = ("overloaded", "shutting_down", "budget_infeasible")


def count_from_zero(
    routes: Iterable[str], answer_routes: Iterable[str], stages: Iterable[str]
) -> None:
    """Start at 0 the series of every label set ragtime knows at start-up, so that a rate of
    them, and a share over them, exists before the first request, overrun or refusal: for each
    question route its outcomes, budget breaches and refusals (and for those that answer, the
    first token against its target); for each stage its overruns of the plan. An absent series
    is not a 0 to Prometheus: a share of violations would have no value until the first one."""
    for route in routes:
        for outcome in OUTCOMES:
            REQUEST_OUTCOMES.labels(route=route, outcome=outcome)
        for kind in BUDGET_BREACHES:
            BUDGET_EXCEEDED.labels(route=route, kind=kind)
        for reason in REFUSALS:
            ADMISSION_REFUSED.labels(route=route, reason=reason)
    for route in answer_routes:
        TTFT_TARGET_RATIO.labels(route=route)
    for stage in stages:
        STAGE_BUDGET_EXCEEDED.labels(stage=stage)


def record_broken_collections(collections: Iterable[str], broken: Iterable[str]) -> None:
    """Set ``ragtime_collection_broken`` for every known collection (and drop the series of
    collections gone)."""
    bad = set(broken)
    names = set(collections) | bad
    for gone in _COLLECTION_SERIES - names:
        COLLECTION_BROKEN.remove(gone)
    for name in names:
        COLLECTION_BROKEN.labels(collection=name).set(1.0 if name in bad else 0.0)
    _COLLECTION_SERIES.clear()
    _COLLECTION_SERIES.update(names)


def metrics_payload(accept: str = "") -> tuple[bytes, str]:
    """The exposition and its content type, for ``GET /metrics``.

    OpenMetrics when the scraper asks for it (``Accept: application/openmetrics-text``, as
    Prometheus does with exemplar storage on): only that format carries the exemplars that link a
    slow histogram bucket to its trace.
    """
    registry = scrape_registry()
    if "application/openmetrics-text" in accept:
        return openmetrics.generate_latest(registry), openmetrics.CONTENT_TYPE_LATEST
    return generate_latest(registry), CONTENT_TYPE_LATEST


def scrape_registry() -> CollectorRegistry:
    """What ``/metrics`` and the in-process alerts read: this process's registry, or in a server
    of several processes (``PROMETHEUS_MULTIPROC_DIR``) all of theirs, read afresh at each
    collection."""
    path = os.environ.get(MULTIPROC_DIR_ENV)
    if not path:
        return REGISTRY
    registry = CollectorRegistry()
    SharedFilesCollector(registry, path=path)
    return registry


class SharedFilesCollector(multiprocess.MultiProcessCollector):
    """prometheus_client's collector of the processes' files, passing over a file still being
    made. prometheus_client creates each file before it sizes it, so for a moment it holds 0
    bytes, and reading it raises: the whole collection fails (prometheus/client_python#1199,
    open). A process's alerts take their first reading as it starts, while the other process
    makes its files: that failure stopped the server (its supervisor stops all when one process
    fails to start). A file of 0 bytes has nothing recorded yet, and once sized it stays so."""

    def collect(self) -> Iterable[Metric]:
        files = []
        for name in glob.glob(os.path.join(self._path, "*.db")):
            with contextlib.suppress(FileNotFoundError):  # a process's live gauges, removed
                if os.path.getsize(name) > 0:
                    files.append(name)
        return self.merge(files, accumulate=True)


def shared_metrics_path(name: str) -> str | None:
    """A file of the several processes' shared metrics directory (``None`` with one process)."""
    path = os.environ.get(MULTIPROC_DIR_ENV)
    return os.path.join(path, name) if path else None


@contextlib.contextmanager
def shared_metrics_dir(processes: int) -> Iterator[str | None]:
    """For a server of ``processes`` processes (started within the block, which inherit the
    environment): a fresh directory for their metrics, named in ``PROMETHEUS_MULTIPROC_DIR`` and
    removed after; an operator's own ``PROMETHEUS_MULTIPROC_DIR`` is used (and kept) instead.
    One process needs none: ``None``."""
    if processes <= 1:
        yield None
        return
    if own := os.environ.get(MULTIPROC_DIR_ENV):
        yield own
        return
    with fresh_shared_dir("ragtime-metrics-", MULTIPROC_DIR_ENV) as path:
        yield str(path)


def process_gone(pid: int | None) -> None:
    """Drop a server process's live gauges once it has exited (the supervisor's side)."""
    path = os.environ.get(MULTIPROC_DIR_ENV)
    if path and pid is not None:
        multiprocess.mark_process_dead(pid, path)


class RequestMetricsMiddleware:
    """Count and time every HTTP request.

    Routes outside ``routes`` are labelled "other", so that unknown paths cannot blow up the
    label set.
    """

    def __init__(self, app: ASGIApp, routes: Iterable[str]) -> None:
        self.app = app
        self.routes = frozenset(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        route = scope["path"] if scope["path"] in self.routes else "other"
        status = 500
        started = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        IN_FLIGHT.labels(route=route).inc()
        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            IN_FLIGHT.labels(route=route).dec()
            REQUESTS.labels(route=route, status=str(status)).inc()
            REQUEST_SECONDS.labels(route=route).observe(time.perf_counter() - started)
