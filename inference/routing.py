"""Model routing: pick a pool (``small``, ``large``, ...) and an endpoint in it per request.

``RoutedBackend`` is a ``GenerationBackend`` over named pools of single-endpoint backends. Per
request, in ``stream()`` and without any network wait:

1. **kind**: a ``QuestionClassifier`` (ordered regex rules and a length threshold) sends the
   question (``AssembledPrompt.question``) to a pool; reason ``classifier``;
2. **budget**: if a routing deadline is in effect (``routing_deadline``) and the chosen pool's
   best endpoint is predicted (recent TTFT stretched by its queue, plus ``max_tokens`` times the
   recent inter-token latency) to need more than is left, the ``budget_pool`` is taken instead;
   reason ``budget``;
3. **endpoint**: among the pool's endpoints that are up, the least loaded by
   (waiting requests, predicted TTFT, requests in flight from here), rotating among equals;
4. **failover**: a pool with no endpoint up hands the request to the next pool that has one;
   reason ``failover``. An endpoint whose request fails before the first delta
   (``BackendUnavailable``, except a 4xx refusal, which is the request's fault) is taken out,
   and the request moves on to the next choice, once per endpoint at most.

Loads come from a background task polling every endpoint each ``poll_interval_s``
(``inference._load_poller``); an endpoint taken out is probed on ``/health`` by the same task
and brought back when it answers 200. The choice goes on the span current when ``stream()`` is
called (the pipeline's ``generate`` span): ``ragtime.route.pool``, ``.endpoint``, ``.reason``,
``.detail`` (which rule or figure decided; never the question) and ``gen_ai.request.model``.

One tokenizer for every pool: the prompt is assembled, and its tokens counted against the
budget, before the backend is called, so every pool must serve models of one tokenizer family
and chat template (e.g. Qwen2.5 1.5B and 32B). ``RoutedBackend.tokenizer`` is that tokenizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Iterator, Mapping, Sequence
from contextlib import aclosing, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

from inference._http_stream import Rejected
from inference._load_poller import EndpointState, LoadSnapshot
from inference._route_classifier import Classification, QuestionClassifier
from inference.backend import GenerationBackend, GenerationEvent, RouteDecision, TextDelta
from inference.errors import BackendUnavailable
from inference.prompt import AssembledPrompt
from inference.tokenizer import PromptTokenizer, load_tokenizer

log = logging.getLogger(__name__)

__all__ = [
    "LoadSnapshot",
    "QuestionClassifier",
    "Route",
    "RoutedBackend",
    "routing_deadline",
]

_deadline: ContextVar[float | None] = ContextVar("ragtime_routing_deadline", default=None)


@contextmanager
def routing_deadline(deadline: float) -> Iterator[None]:
    """Within this block, ``RoutedBackend.stream()`` routes for a request that must finish by
    ``deadline`` (a ``time.perf_counter()`` value, e.g. ``BudgetLedger.deadline``)."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


@dataclass(frozen=True)
class Route:
    pool: str
    endpoint: str
    model: str
    reason: str
    """``classifier``, ``budget`` or ``failover``."""
    detail: str


@dataclass
class _Endpoint:
    pool: str
    backend: GenerationBackend
    state: EndpointState


class RoutedBackend(GenerationBackend):
    """Routes each request to a pool and an endpoint; see the module docstring.

    ``pools`` maps a pool name to its ``(endpoint URL, backend)`` pairs, one backend per
    endpoint (the URL is where loads are polled). Every pool the classifier names must exist.
    """

    def __init__(
        self,
        pools: Mapping[str, Sequence[tuple[str, GenerationBackend]]],
        *,
        tokenizer: PromptTokenizer,
        classifier: QuestionClassifier | None = None,
        budget_pool: str | None = "small",
        poll_interval_s: float = 2.0,
        poll_timeout_s: float = 2.0,
    ) -> None:
        if not pools or not all(pools.values()):
            raise ValueError("routing needs at least one pool, each with at least one endpoint")
        self.classifier = classifier or QuestionClassifier()
        missing = self.classifier.pools - set(pools)
        if budget_pool is not None and budget_pool not in pools:
            missing.add(budget_pool)
        if missing:
            raise ValueError(f"route rules name pools that are not configured: {sorted(missing)}")
        if poll_interval_s <= 0 or poll_timeout_s <= 0:
            raise ValueError("poll_interval_s and poll_timeout_s must be > 0")
        self.budget_pool = budget_pool
        self.poll_interval_s = poll_interval_s
        self.poll_timeout = httpx.Timeout(poll_timeout_s)
        self._tokenizer = tokenizer
        self._pools: dict[str, list[_Endpoint]] = {}
        self._by_url: dict[str, _Endpoint] = {}
        for pool, members in pools.items():
            for url, backend in members:
                endpoint = _Endpoint(pool, backend, EndpointState(url))
                if endpoint.state.url in self._by_url:
                    raise ValueError(f"endpoint {url} is listed twice")
                self._by_url[endpoint.state.url] = endpoint
                self._pools.setdefault(pool, []).append(endpoint)
        names = {e.backend.name for e in self._by_url.values()}
        self.name = names.pop() if len(names) == 1 else "routed"
        self.model = ",".join(f"{p}={self._pools[p][0].backend.model}" for p in self._pools)
        self._client: httpx.AsyncClient | None = None
        self._poller: asyncio.Task[None] | None = None
        self._turn = 0

    @classmethod
    def sglang(
        cls,
        pools: Mapping[str, Mapping[str, Any]],
        *,
        tokenizer: PromptTokenizer,
        classifier: QuestionClassifier | None = None,
        budget_pool: str | None = "small",
        poll_interval_s: float = 2.0,
        **sglang_options: Any,
    ) -> RoutedBackend:
        """Pools of SGLang servers: ``{"small": {"model": ..., "endpoints": [url, ...]}}``;
        ``sglang_options`` go to every ``SGLangBackend`` (timeouts, priority, incremental)."""
        from inference.sglang import SGLangBackend

        members: dict[str, list[tuple[str, GenerationBackend]]] = {}
        for pool, spec in pools.items():
            model, urls = spec.get("model"), spec.get("endpoints")
            if not isinstance(model, str) or not isinstance(urls, list) or not urls:
                raise ValueError(f"pool {pool!r} needs a model and a non-empty endpoints list")
            members[pool] = [
                (
                    url,
                    SGLangBackend(
                        [url],
                        model=model,
                        tokenizer=tokenizer,
                        max_attempts=1,  # the router moves on to the next endpoint itself
                        health_interval_s=None,  # the router's poller probes
                        **sglang_options,
                    ),
                )
                for url in urls
            ]
        return cls(
            members,
            tokenizer=tokenizer,
            classifier=classifier,
            budget_pool=budget_pool,
            poll_interval_s=poll_interval_s,
            poll_timeout_s=sglang_options.get("connect_timeout_s", 2.0),
        )

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def tokenizer(self) -> PromptTokenizer:
        return self._tokenizer

    @property
    def loaded(self) -> bool:
        return self._client is not None and any(e.state.up for e in self._by_url.values())

    @property
    def endpoints(self) -> dict[str, EndpointState]:
        """Every endpoint's state (health, latest load), by URL; read-only use."""
        return {url: e.state for url, e in self._by_url.items()}

    async def start(self) -> None:
        if self._client is not None:
            return
        await load_tokenizer(self._tokenizer, "routing")
        endpoints = list(self._by_url.values())
        results = await asyncio.gather(
            *(e.backend.start() for e in endpoints), return_exceptions=True
        )
        for endpoint, result in zip(endpoints, results, strict=True):
            if isinstance(result, BaseException):
                endpoint.state.mark_down(f"did not start: {result}")
        self._client = httpx.AsyncClient(timeout=self.poll_timeout)
        await self.poll_once()
        if not self.loaded:
            log.warning("routing: no endpoint is up yet: %s", sorted(self._by_url))
        self._poller = asyncio.create_task(self._poll_loop())

    async def close(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        await asyncio.gather(
            *(e.backend.close() for e in self._by_url.values()), return_exceptions=True
        )

    async def poll_once(self) -> None:
        """Refresh every endpoint's load (or probe its health, if it is out) once."""
        client = self._client
        if client is None:
            return
        await asyncio.gather(
            *(e.state.poll(client, self.poll_timeout) for e in self._by_url.values())
        )

    async def _poll_loop(self) -> None:
        while self._client is not None:  # ends when close() cancels it
            await asyncio.sleep(self.poll_interval_s)
            try:
                await self.poll_once()
            except Exception:  # a bug in polling must not stop it for good
                log.exception("routing: load poll failed")

    # -- the choice ----------------------------------------------------------------------------

    def choose(
        self,
        question: str,
        *,
        max_tokens: int,
        remaining_ms: float | None = None,
        exclude: frozenset[str] = frozenset(),
    ) -> Route:
        """The route for one request, from snapshots only; ``BackendUnavailable`` if no
        endpoint (outside ``exclude``) is up."""
        kind = (
            self.classifier.classify(question)
            if question
            else Classification(self.classifier.default_pool, "no question")
        )
        pool, reason, detail = kind.pool, "classifier", kind.detail
        budget_pool = self.budget_pool
        if remaining_ms is not None and budget_pool is not None and pool != budget_pool:
            need = self._need_ms(pool, max_tokens, exclude)
            if need is not None and need > remaining_ms:
                reason = "budget"
                detail = f"{pool} needs ~{need:.0f} ms, {max(remaining_ms, 0.0):.0f} ms left"
                pool = budget_pool
        chosen = self._best(pool, exclude)
        if chosen is None:
            for other in self._pools:
                chosen = self._best(other, exclude) if other != pool else None
                if chosen is not None:
                    reason, detail = "failover", f"no endpoint of {pool} is up ({detail})"
                    pool = other
                    break
        if chosen is None:
            down = "; ".join(f"{u}: {e.state.down_reason}" for u, e in self._by_url.items())
            raise BackendUnavailable(f"routing: no endpoint is up ({down})")
        self._turn += 1
        return Route(pool, chosen.state.url, chosen.backend.model, reason, detail)

    def _up(self, pool: str, exclude: frozenset[str]) -> list[_Endpoint]:
        return [e for e in self._pools[pool] if e.state.up and e.state.url not in exclude]

    def _best(self, pool: str, exclude: frozenset[str]) -> _Endpoint | None:
        candidates = self._up(pool, exclude)
        if not candidates:
            return None
        n = len(candidates)

        def load(item: tuple[int, _Endpoint]) -> tuple[int, float, int, int]:
            i, endpoint = item
            snap = endpoint.state.snapshot
            ttft = snap.predicted_ttft_ms
            return (snap.waiting, ttft or 0.0, endpoint.state.in_flight, (i - self._turn) % n)

        return min(enumerate(candidates), key=load)[1]

    def _need_ms(self, pool: str, max_tokens: int, exclude: frozenset[str]) -> float | None:
        """The best predicted time to the last token in ``pool``; None while unknown."""
        needs = [e.state.snapshot.predicted_ms(max_tokens) for e in self._up(pool, exclude)]
        known = [n for n in needs if n is not None]
        return min(known) if known else None

    # -- streaming -------------------------------------------------------------------------

    def stream(
        self,
        prompt: AssembledPrompt,
        *,
        max_tokens: int,
        temperature: float = 0.0,
        deadline: float | None = None,
    ) -> AsyncGenerator[GenerationEvent, None]:
        """Route now, in the caller's context (its span gets the choice); stream lazily."""
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if deadline is None:
            deadline = _deadline.get()
        remaining_ms = None if deadline is None else (deadline - time.perf_counter()) * 1000.0
        span = trace.get_current_span()
        route: Route | BackendUnavailable
        self.last_degradation = None
        try:
            route = self.choose(prompt.question, max_tokens=max_tokens, remaining_ms=remaining_ms)
        except BackendUnavailable as exc:
            route = exc  # raised at the first anext(), as the contract says
        else:
            _record(span, route)
            if route.reason == "budget":
                self.last_degradation = ("smaller_model", f"{route.model}: {route.detail}")
        return self._stream(prompt, max_tokens, temperature, route, span, remaining_ms)

    async def _stream(
        self,
        prompt: AssembledPrompt,
        max_tokens: int,
        temperature: float,
        first: Route | BackendUnavailable,
        span: Span,
        remaining_ms: float | None,
    ) -> AsyncGenerator[GenerationEvent, None]:
        if isinstance(first, BackendUnavailable):
            raise first
        route = first
        context = trace.set_span_in_context(span)
        tried: set[str] = set()
        failures: list[str] = []
        while True:
            endpoint = self._by_url[route.endpoint]
            token = otel_context.attach(context)  # the backend propagates this span's context
            try:
                events = endpoint.backend.stream(
                    prompt, max_tokens=max_tokens, temperature=temperature
                )
            finally:
                otel_context.detach(token)
            endpoint.state.in_flight += 1
            streamed = False
            degradation = (
                ("smaller_model", f"{route.model}: {route.detail}")
                if route.reason == "budget"
                else None
            )
            yield RouteDecision(
                target=route.endpoint,
                model=route.model,
                pool=route.pool,
                reason=route.reason,
                detail=route.detail,
                degradation=degradation,
            )
            try:
                async with aclosing(events):
                    async for event in events:
                        if isinstance(event, RouteDecision):
                            continue  # the router's decision above stands for the endpoint's
                        streamed = streamed or isinstance(event, TextDelta)
                        yield event
                return
            except BackendUnavailable as exc:
                cause = exc.__cause__
                if streamed or (isinstance(cause, Rejected) and not cause.retryable):
                    raise  # the request's fault (a 4xx), not the endpoint's
                endpoint.state.mark_down(f"request failed: {exc}")
                failures.append(f"{route.endpoint}: {exc}")
                tried.add(route.endpoint)
            finally:
                endpoint.state.in_flight -= 1
            try:
                route = self.choose(
                    prompt.question,
                    max_tokens=max_tokens,
                    remaining_ms=remaining_ms,
                    exclude=frozenset(tried),
                )
            except BackendUnavailable as exc:
                raise BackendUnavailable(
                    f"routing: no endpoint served the request: {'; '.join(failures)}"
                ) from exc
            route = Route(route.pool, route.endpoint, route.model, "failover", failures[-1])
            if span.is_recording():
                span.add_event("ragtime.route.failover", {"ragtime.route.failed": failures[-1]})
            _record(span, route)


def _record(span: Span, route: Route) -> None:
    if span.is_recording():
        span.set_attributes(
            {
                "ragtime.route.pool": route.pool,
                "ragtime.route.endpoint": route.endpoint,
                "ragtime.route.reason": route.reason,
                "ragtime.route.detail": route.detail,
                "gen_ai.request.model": route.model,
            }
        )
