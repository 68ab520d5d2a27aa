"""Model routing: pick a pool (``small``, ``large``, ...) and an endpoint in it per request.

``RoutedBackend`` is a ``GenerationBackend`` over named pools, each a remote backend of one
model (``SGLangBackend``) with one or more endpoints. Per request, in ``stream()`` and without
any network wait:

1. **kind**: a ``QuestionClassifier`` (ordered regex rules and a length threshold) sends the
   question (``AssembledPrompt.question``) to a pool; reason ``classifier``;
2. **budget**: the budget engine plans each answer with the costs of the targets
   ``cost_targets`` lists (the classifier's pool, then the ``budget_pool``'s best endpoint) and
   names the first whose plan fits in ``stream(..., target=...)``; a target in another pool
   than the classifier's moves the request there, reason ``budget`` (the plan reports the
   degradation ``smaller_model``). One cost model decides: the router predicts nothing;
3. **endpoint**: among the pool's endpoints that can serve (up, or busy long enough ago), the
   least loaded by (waiting requests, recent TTFT, requests in flight from here), rotating
   among equals;
4. **failover**: a pool with no endpoint serving hands the request to the next pool that has
   one; reason ``failover``. An attempt that fails before the first delta for the server's
   sake (down) or because it is full (busy) moves the request on to the next choice, once
   per endpoint at most; a request's own error (``GenerationRejected``) goes back to the
   caller at once and takes nothing out.

Every endpoint's state lives in its pool backend (``inference.remote.endpoints.EndpointState``),
kept by that backend's background poll and by what requests see: one health mechanism for
plain and routed use. Each attempt yields a ``RouteDecision`` (and another if the endpoint had
to cap the output to its context length). The choice goes on the span current when
``stream()`` is called (the pipeline's ``generate`` span): ``ragtime.route.pool``,
``.endpoint``, ``.reason``, ``.detail`` (which rule or figure decided; never the question)
and ``gen_ai.request.model``.

One tokenizer for every pool: the prompt is assembled, and its tokens counted against the
budget, before the backend is called, so every pool must serve models of one tokenizer family
and chat template (e.g. Qwen2.5 1.5B and 32B). ``RoutedBackend.tokenizer`` is that tokenizer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span

from inference.backend import (
    SERVER_PENALTIES,
    GenerationBackend,
    GenerationEvent,
    Penalties,
    RouteDecision,
    TargetLoad,
    TextDelta,
    Urgency,
)
from inference.errors import BackendBusy, BackendUnavailable
from inference.prompt import AssembledPrompt
from inference.remote.endpoints import EndpointState, Health
from inference.remote.faults import StreamError
from inference.remote.http_stream import HTTPStreamBackend
from inference.remote.options import RemoteOptions
from inference.remote.sampling import Sampling
from inference.routing.classifier import Classification, QuestionClassifier
from inference.routing.route import Route
from inference.tokenizer import PromptTokenizer, load_tokenizer

log = logging.getLogger(__name__)

__all__ = ["QuestionClassifier", "Route", "RoutedBackend"]


class RoutedBackend(GenerationBackend):
    """Routes each request to a pool and an endpoint; see the module docstring.

    ``pools`` maps a pool name to its remote backend (one model, its endpoints). Every pool
    the classifier names must exist.
    """

    def __init__(
        self,
        pools: Mapping[str, HTTPStreamBackend],
        *,
        tokenizer: PromptTokenizer,
        classifier: QuestionClassifier | None = None,
        budget_pool: str | None = "small",
    ) -> None:
        if not pools:
            raise ValueError("routing needs at least one pool, each with at least one endpoint")
        self.classifier = classifier or QuestionClassifier()
        missing = self.classifier.pools - set(pools)
        if budget_pool is not None and budget_pool not in pools:
            missing.add(budget_pool)
        if missing:
            raise ValueError(f"route rules name pools that are not configured: {sorted(missing)}")
        self.budget_pool = budget_pool
        self._tokenizer = tokenizer
        self._pools = dict(pools)
        self._pool_of: dict[str, str] = {}
        for pool, backend in self._pools.items():
            for url in backend.endpoints:
                if url in self._pool_of:
                    raise ValueError(f"endpoint {url} is listed twice")
                self._pool_of[url] = pool
        names = {b.name for b in self._pools.values()}
        self.name = names.pop() if len(names) == 1 else "routed"
        self.model = ",".join(f"{p}={b.model}" for p, b in self._pools.items())
        self.options = next(iter(self._pools.values())).options
        self._started = False
        self._turn = 0

    @classmethod
    def sglang(
        cls,
        pools: Mapping[str, Mapping[str, Any]],
        *,
        tokenizer: PromptTokenizer,
        classifier: QuestionClassifier | None = None,
        budget_pool: str | None = "small",
        options: RemoteOptions | None = None,
    ) -> RoutedBackend:
        """Pools of SGLang servers: ``{"small": {"model": ..., "endpoints": [url, ...]}}``, each
        optionally with the ``context_length`` and ``max_running`` its servers do not tell;
        ``options`` go to every pool's ``SGLangBackend`` (``max_attempts`` is 1: the router
        moves on to the next endpoint itself)."""
        from dataclasses import replace

        from inference.remote.sglang import SGLangBackend

        options = replace(options or RemoteOptions(), max_attempts=1)
        members: dict[str, HTTPStreamBackend] = {}
        for pool, spec in pools.items():
            model, urls = spec.get("model"), spec.get("endpoints")
            if not isinstance(model, str) or not isinstance(urls, list | tuple) or not urls:
                raise ValueError(f"pool {pool!r} needs a model and a non-empty endpoints list")
            told = {k: spec[k] for k in ("context_length", "max_running") if spec.get(k)}
            members[pool] = SGLangBackend(
                urls, model=model, tokenizer=tokenizer, options=replace(options, **told)
            )
        return cls(members, tokenizer=tokenizer, classifier=classifier, budget_pool=budget_pool)

    # -- lifecycle and state -----------------------------------------------------------------

    @property
    def tokenizer(self) -> PromptTokenizer:
        return self._tokenizer

    @property
    def loaded(self) -> bool:
        return self._started and any(b.loaded for b in self._pools.values())

    def not_ready(self) -> str | None:
        if self.loaded:
            return None
        said = [f"pool {p}: {b.not_ready()}" for p, b in self._pools.items() if b.not_ready()]
        return "; ".join(said) or None

    @property
    def pending(self) -> int:
        return sum(b.pending for b in self._pools.values())

    @property
    def remote_slots(self) -> int:
        return sum(b.remote_slots for b in self._pools.values())

    @property
    def pools(self) -> dict[str, HTTPStreamBackend]:
        return dict(self._pools)

    @property
    def endpoints(self) -> dict[str, EndpointState]:
        """Every endpoint's state (health, facts, latest load), by URL; read-only use."""
        return {url: s for b in self._pools.values() for url, s in b.states.items()}

    @property
    def context_length(self) -> int | None:
        """The smallest context length any pool reported (None: none yet)."""
        known = [b.context_length for b in self._pools.values() if b.context_length]
        return min(known) if known else None

    def cost_target(self, question: str = "") -> str:
        try:
            return self.choose(question, turn=False).endpoint
        except BackendUnavailable:
            return next(iter(self._pool_of))

    def cost_targets(self, question: str = "") -> list[str]:
        """The classifier's choice, then the budget pool's best endpoint (when it is another
        pool's and one serves)."""
        first = self.cost_target(question)
        pool = self.budget_pool
        if pool is None or self._pool_of.get(first.rstrip("/")) == pool:
            return [first]
        smaller = self._best(pool, frozenset())
        return [first] if smaller is None else [first, smaller.url]

    def target_model(self, target: str) -> str | None:
        """The model of the pool ``target`` (an endpoint) belongs to; None for another."""
        pool = self._pool_of.get(target.rstrip("/"))
        return None if pool is None else self._pools[pool].model

    def probe_backends(self) -> Mapping[str, GenerationBackend]:
        return {u: b for pool in self._pools.values() for u, b in pool.probe_backends().items()}

    def target_load(self, target: str) -> TargetLoad | None:
        pool = self._pool_of.get(target.rstrip("/"))
        return None if pool is None else self._pools[pool].target_load(target)

    async def start(self) -> None:
        if self._started:
            return
        await load_tokenizer(self._tokenizer, "routing")
        backends = list(self._pools.values())
        results = await asyncio.gather(*(b.start() for b in backends), return_exceptions=True)
        for backend, result in zip(backends, results, strict=True):
            if isinstance(result, BaseException):
                for state in backend.states.values():
                    state.mark_down(f"did not start: {result}")
        self._started = True
        if not self.loaded:
            log.warning("routing: no endpoint is up yet: %s", sorted(self._pool_of))

    async def close(self) -> None:
        self._started = False
        await asyncio.gather(*(b.close() for b in self._pools.values()), return_exceptions=True)

    async def poll_once(self) -> None:
        """Poll every endpoint of every pool once (each pool also polls in the background)."""
        await asyncio.gather(*(b.poll_once() for b in self._pools.values()))

    # -- the choice ----------------------------------------------------------------------------

    def choose(
        self,
        question: str,
        *,
        pool: str | None = None,
        exclude: frozenset[str] = frozenset(),
        turn: bool = True,
    ) -> Route:
        """The route for one request, from the endpoints' states only: to ``pool`` when the
        budget's plan names one, else the classifier's; ``BackendBusy`` when every endpoint
        left is busy, ``BackendUnavailable`` when none (outside ``exclude``) can serve."""
        kind = (
            self.classifier.classify(question)
            if question
            else Classification(self.classifier.default_pool, "no question")
        )
        reason, detail = "classifier", kind.detail
        if pool is not None and pool != kind.pool:
            reason = "budget"
            detail = f"the budget's plan did not fit {kind.pool} ({kind.detail})"
        else:
            pool = kind.pool
        chosen = self._best(pool, exclude)
        if chosen is None:
            for other in self._pools:
                chosen = self._best(other, exclude) if other != pool else None
                if chosen is not None:
                    reason, detail = "failover", f"no endpoint of {pool} is up ({detail})"
                    pool = other
                    break
        if chosen is None:
            left = [s for u, s in self.endpoints.items() if u not in exclude]
            states = "; ".join(f"{s.url}: {s.health.value} ({s.reason})" for s in left)
            if left and all(s.health is Health.BUSY for s in left):
                raise BackendBusy(
                    f"routing: every endpoint is busy ({states})",
                    retry_after_s=max(self.options.busy_s, 1.0),
                )
            raise BackendUnavailable(f"routing: no endpoint is up ({states})")
        if turn:
            self._turn += 1
        return Route(pool, chosen.url, self._pools[pool].model, reason, detail)

    def _serving(self, pool: str, exclude: frozenset[str]) -> list[EndpointState]:
        states = self._pools[pool].states.values()
        return [s for s in states if s.serving and s.url not in exclude]

    def _best(self, pool: str, exclude: frozenset[str]) -> EndpointState | None:
        candidates = self._serving(pool, exclude)
        if not candidates:
            return None
        n = len(candidates)

        def load(item: tuple[int, EndpointState]) -> tuple[int, float, int, int]:
            i, state = item
            return (state.load.waiting, state.ttft_ms or 0.0, state.in_flight, (i - self._turn) % n)

        return min(enumerate(candidates), key=load)[1]

    # -- streaming -------------------------------------------------------------------------

    def _generate(
        self,
        prompt: AssembledPrompt,
        *,
        max_tokens: int,
        temperature: float,
        deadline: float | None,
        target: str | None,
        urgency: Urgency | None = None,
        penalties: Penalties = SERVER_PENALTIES,
    ) -> AsyncGenerator[GenerationEvent, None]:
        """Route now, in the caller's context (its span gets the choice); stream lazily."""
        pool = self._pool_of.get(target.rstrip("/")) if target else None
        span = trace.get_current_span()
        route: Route | BackendUnavailable
        try:
            route = self.choose(prompt.question, pool=pool)
        except BackendUnavailable as exc:
            route = exc  # raised at the first anext(), as the contract says
        else:
            route.record(span)
        sampling = Sampling(temperature, penalties)
        return self._stream(prompt, max_tokens, sampling, route, span, pool, urgency)

    async def _stream(
        self,
        prompt: AssembledPrompt,
        max_tokens: int,
        sampling: Sampling,
        first: Route | BackendUnavailable,
        span: Span,
        pool: str | None,
        urgency: Urgency | None = None,
    ) -> AsyncGenerator[GenerationEvent, None]:
        if isinstance(first, BackendUnavailable):
            raise first
        route = first
        context = trace.set_span_in_context(span)
        tried: set[str] = set()
        failures: list[str] = []
        busy = 0
        while True:
            backend = self._pools[route.pool].endpoint(route.endpoint)
            token = otel_context.attach(context)  # the backend propagates this span's context
            try:
                events = backend.stream(
                    prompt,
                    max_tokens=max_tokens,
                    temperature=sampling.temperature,
                    urgency=urgency,
                    penalties=sampling.penalties,
                )
            finally:
                otel_context.detach(token)
            streamed = False
            yield route.decision()
            try:
                async with aclosing(events):
                    async for event in events:
                        if isinstance(event, RouteDecision):
                            if event.degradation is not None:  # the output capped to fit
                                yield route.decision(event.degradation)
                            continue
                        streamed = streamed or isinstance(event, TextDelta)
                        yield event
                return
            except BackendUnavailable as exc:
                cause = exc.__cause__
                if streamed or (isinstance(cause, StreamError) and cause.fault == "config"):
                    raise
                busy += isinstance(exc, BackendBusy)
                failures.append(f"{route.endpoint}: {exc}")
                tried.add(route.endpoint)
            try:
                route = self.choose(prompt.question, pool=pool, exclude=frozenset(tried))
            except BackendUnavailable as exc:
                message = f"routing: no endpoint served the request: {'; '.join(failures)}"
                if busy == len(failures):
                    retry = max(self.options.busy_s, 1.0)
                    raise BackendBusy(message, retry_after_s=retry) from exc
                raise BackendUnavailable(message) from exc
            route = Route(route.pool, route.endpoint, route.model, "failover", failures[-1])
            if span.is_recording():
                span.add_event("ragtime.route.failover", {"ragtime.route.failed": failures[-1]})
            route.record(span)
