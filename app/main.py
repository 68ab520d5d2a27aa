"""Builds the FastAPI app, the composition root: every long-lived object, built once and handed
down; the lifespan that starts them (models, index, tracing); routers, middleware, errors."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

from app.frontdoor import socket_wait
from app.frontdoor.gate import GATE_KEY, Admission, Gate
from app.frontdoor.middleware import AdmissionMiddleware, ArrivalMiddleware
from app.frontdoor.server import GracefulServer
from app.frontdoor.shutdown import Shutdown, ShutdownMiddleware
from app.http import access_log, openapi
from app.http.errors import install_error_handlers
from app.http.limits import door_budget
from app.http.routes import alerts, ask, budget, chat, collections, health, search
from app.keys.ratelimit import build_limiter
from app.pipeline import Pipeline
from app.pipeline.budget_engine import build_budget_engine, cost_model
from app.pipeline.calibration import probes, reported_itl_ms
from app.pipeline.services import Services
from app.settings import Settings, get_settings, usable_cores
from app.ui import install as install_page
from inference import GenerationBackend
from tracing import RequestMetricsMiddleware, configure_tracing, flush_tracing
from tracing import metrics as tracing_metrics
from tracing.alerts import AlertEvaluator
from tracing.budget import BudgetEngine, StageName
from tracing.budget.door.book import FinishAdmission
from tracing.budget.door.peers import Peers, serving_processes
from tracing.loop_lag import LoopLag

log = logging.getLogger("ragtime")

API_ROUTES = (
    "/v1/ask",
    "/v1/chat/completions",
    "/v1/models",
    "/v1/search",
    "/v1/alerts",
    "/v1/budget/model",
    "/v1/collections",
    "/healthz",
    "/readyz",
    "/metrics",
)
#: The routes whose requests admission control bounds (``app.frontdoor.gate``).
QUESTION_ROUTES = ("/v1/ask", "/v1/chat/completions", "/v1/search")
#: Of those, the routes that generate an answer.
ANSWER_ROUTES = frozenset({"/v1/ask", "/v1/chat/completions"})


def alert_evaluator(settings: Settings) -> AlertEvaluator:
    """The in-process alerts over the server's metrics (every process's), as configured."""
    return AlertEvaluator(
        webhook_url=settings.alert_webhook_url,
        interval_s=settings.alert_interval_s,
        window_s=settings.alert_window_s,
        for_s=settings.alert_for_s,
        cooldown_s=settings.alert_cooldown_s,
        budget_violation_ratio=settings.alert_budget_violation_ratio,
        stage_violation_ratio=settings.alert_stage_violation_ratio,
        error_ratio=settings.alert_error_ratio,
    )


def generation_floor(budget: BudgetEngine, backend: GenerationBackend) -> Callable[[str], float]:
    """The smallest answer's generation at the median, for admission's prediction: nothing for
    a search, which generates nothing."""

    def floor_ms(route: str) -> float:
        if route not in ANSWER_ROUTES:
            return 0.0
        targets = backend.cost_targets("")
        return budget.smallest_generation_ms(targets[0], 0.5) if targets else 0.0

    return floor_ms


def create_app(
    settings: Settings | None = None,
    *,
    backend: GenerationBackend | None = None,
    services: Services | None = None,
) -> FastAPI:
    """The service, every long-lived object built here once and handed down: nothing is set
    on one after it is built. Building connects, opens, starts and writes nothing: the
    lifespan starts the services (models, the key store, the data dir), once. ``backend``
    replaces the configured generation backend (tests, benches); ``services`` replaces every
    component (a test that needs no real model loads none), and its settings are the app's."""
    if services is not None and backend is not None:
        raise ValueError("give backend or services, not both")
    settings = services.settings if services is not None else settings or get_settings()
    configure_tracing()
    access_log.install()
    loop_lag = LoopLag()
    # The process's one cost model: the door, the stages' threads, the local backend and the
    # budget engine all learn into it and read from it.
    costs = services.costs if services is not None else cost_model(settings)
    live = services or Services.build(settings, backend=backend, costs=costs)
    engine = build_budget_engine(settings, costs, loop_lag_ms=loop_lag.ms)
    finish = FinishAdmission(
        cores=usable_cores(),
        processes=serving_processes(),
        peers=Peers.from_environment(),
        generation_floor_ms=generation_floor(engine, live.backend),
        lag_ms=loop_lag.ms,
        margin_share=settings.admission_margin,
        pace=costs.door,
    )
    loop_lag.listeners.append(finish.observe_lag)
    admission = Admission(
        settings.max_in_flight,
        retry_after_s=settings.retry_after_s,
        finish=finish,
        remote_slots=lambda: live.backend.remote_slots,
    )

    shutdown = Shutdown(settings.shutdown_grace_s)
    socket_wait.jiffy_ms()  # measured once, here rather than in a request
    gate = Gate(
        admission,
        routes=frozenset(QUESTION_ROUTES),
        openai_routes=frozenset({chat.ROUTE}),
        shutdown=shutdown,
        budget_ms=functools.partial(door_budget, settings=settings),
        lag_ms=loop_lag.ms,
        decides=settings.admit_as_parsed,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, object]]:
        shutdown.bind(asyncio.get_running_loop())
        await live.start()
        overhead = live.stages.assemble.overhead_tokens
        if overhead is not None:  # measured at warm-up with the served model's tokenizer
            engine.set_prompt_overhead(overhead)
        # Each target's plans are weighed with the quality curves of the model it serves.
        engine.set_target_models(live.backend.target_model)
        app.state.rate_limiter = limiter = build_limiter(settings)
        gen = live.backend
        # Calibrate remote targets as they join; publish the cost model as metrics.
        upkeep = asyncio.create_task(
            engine.maintain(
                lambda: probes(gen) if settings.calibrate else {},
                interval_s=settings.calibration_interval_s,
                itl_ms=lambda target: reported_itl_ms(gen, target),
            ),
            name="ragtime-budget-upkeep",
        )
        lag = asyncio.create_task(loop_lag.measure(), name="ragtime-loop-lag")
        # Every series the alerts and the dashboard divide by exists, at 0, from the start.
        tracing_metrics.count_from_zero(QUESTION_ROUTES, sorted(ANSWER_ROUTES), list(StageName))
        app.state.alerts = alert_evaluator(settings)
        await app.state.alerts.start()  # runs without a webhook too, for GET /v1/alerts
        ready, components = live.readiness()
        log.info("ragtime %s: %s", "ready" if ready else "NOT ready", components)
        try:
            # How the server finds the stop, and its HTTP protocol the admission.
            yield {GracefulServer.STATE_KEY: shutdown, GATE_KEY: gate}
        finally:
            for task in (upkeep, lag):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await app.state.alerts.stop()
            await limiter.close()
            await live.close()
            flush_tracing()  # the provider outlives an app; `ragtime serve` shuts it down

    # /docs and /redoc load their scripts from an installed package, not a CDN: the offline
    # default reaches no network, and FastAPI's own pages would stay blank there.
    app = FastAPIOffline(
        title="ragtime",
        summary="Retrieval-augmented answers within a latency budget.",
        version="0.1.0",
        lifespan=lifespan,
        static_url="/docs/assets",
    )
    app.state.services = live
    app.state.budget = engine
    app.state.pipeline = Pipeline(live)
    app.state.admission = admission
    app.state.shutdown = shutdown
    app.state.loop_lag = loop_lag
    install_error_handlers(app, retry_after_s=settings.retry_after_s)
    app.include_router(ask.router)
    app.include_router(chat.router)
    app.include_router(search.router)
    app.include_router(collections.router)
    app.include_router(health.router)
    app.include_router(alerts.router)
    app.include_router(budget.router)
    install_page(app, settings)
    openapi.install(app, settings)
    FastAPIInstrumentor.instrument_app(
        app,
        excluded_urls="/healthz,/readyz,/metrics",
        exclude_spans=["receive", "send"],
        server_request_hook=access_log.redact_span_url,
    )
    # Outermost last: every request is stamped (where the protocol did not), then counted and
    # timed, refusals included; the stop's refuser sees every request before admission does.
    app.add_middleware(AdmissionMiddleware, gate=gate)
    app.add_middleware(
        ShutdownMiddleware,
        shutdown=shutdown,
        retry_after_s=settings.retry_after_s,
        openai_routes=frozenset({chat.ROUTE}),
    )
    app.add_middleware(RequestMetricsMiddleware, routes=API_ROUTES)
    app.add_middleware(ArrivalMiddleware, lag_ms=loop_lag.ms)
    return app
