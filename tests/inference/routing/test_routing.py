"""The router against three fake SGLang servers: two small-model endpoints and one large."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.sglang_sim.queueing import Turn
from bench.sglang_sim.server import SimulatedSGLang
from inference import (
    AssembledPrompt,
    BackendUnavailable,
    GenerationDone,
    GenerationRejected,
    HFTokenizer,
    PromptAssembler,
    QuestionClassifier,
    RemoteOptions,
    RoutedBackend,
    RouteDecision,
    TextDelta,
)
from tests.fakes._serve import ServerThread, refused_url
from tests.fakes.passages import Doc

LOOKUP = "What is a list?"
REASONING = "Why are tuples not mutable?"

Scope = dict[str, Any]
ASGI = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Any]


class PathCounter:
    """ASGI middleware keeping the path of every HTTP request a fake received."""

    def __init__(self, app: ASGI) -> None:
        self.app = app
        self.paths: list[str] = []

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
        await self.app(scope, receive, send)

    def count(self, path: str) -> int:
        return sum(1 for p in list(self.paths) if p == path)


class Fake:
    def __init__(self) -> None:
        self.server = SimulatedSGLang()
        self.counter = PathCounter(self.server.app)
        self.url = ""


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[Fake, Fake, Fake]]:
    fakes = Fake(), Fake(), Fake()
    with (
        ServerThread(fakes[0].counter) as a,
        ServerThread(fakes[1].counter) as b,
        ServerThread(fakes[2].counter) as c,
    ):
        for fake, thread in zip(fakes, (a, b, c), strict=True):
            fake.url = thread.url
        yield fakes


@pytest.fixture
def fakes(servers: tuple[Fake, Fake, Fake]) -> tuple[Fake, Fake, Fake]:
    for fake in servers:
        fake.server.reset()
        fake.counter.paths.clear()
    return servers


@pytest.fixture
async def make_router(
    tokenizer: HFTokenizer, fakes: tuple[Fake, Fake, Fake]
) -> AsyncIterator[Callable[..., Awaitable[RoutedBackend]]]:
    made: list[RoutedBackend] = []

    async def make(
        small: list[str] | None = None, large: list[str] | None = None, **kwargs: Any
    ) -> RoutedBackend:
        kwargs.setdefault("poll_interval_s", 60.0)  # tests poll by hand unless they say
        kwargs.setdefault("stall_timeout_s", 5.0)
        small = small or [fakes[0].url, fakes[1].url]
        router = RoutedBackend.sglang(
            {
                "small": {"model": "fake/small", "endpoints": small},
                "large": {"model": "fake/large", "endpoints": large or [fakes[2].url]},
            },
            tokenizer=tokenizer,
            options=RemoteOptions(**kwargs),
        )
        made.append(router)
        await router.start()
        return router

    yield make
    for router in made:
        await router.close()


def prompt_for(tokenizer: HFTokenizer, question: str) -> AssembledPrompt:
    return PromptAssembler(tokenizer, context_tokens=200).assemble(
        question, [Doc("Lists are mutable sequences.")]
    )


async def collect(
    router: RoutedBackend, prompt: AssembledPrompt, max_tokens: int = 8
) -> GenerationDone:
    events = [e async for e in router.stream(prompt, max_tokens=max_tokens)]
    assert isinstance(events[0], RouteDecision)
    events = [e for e in events if not isinstance(e, RouteDecision)]
    assert all(isinstance(e, TextDelta) for e in events[:-1])
    assert isinstance(events[-1], GenerationDone)
    return events[-1]


async def stream_in_span(
    router: RoutedBackend,
    prompt: AssembledPrompt,
    max_tokens: int = 8,
    target: str | None = None,
) -> tuple[list[Any], str]:
    """As the pipeline does: ``stream()`` called with the span current, consumed outside it,
    the span ended after; the events and the span's trace id."""
    span = trace.get_tracer(__name__).start_span("generate")
    with trace.use_span(span, end_on_exit=False):
        events = router.stream(prompt, max_tokens=max_tokens, target=target)
    try:
        return [e async for e in events], format(span.get_span_context().trace_id, "032x")
    finally:
        span.end()


# -- the classifier ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "pool"),
    [
        ("What is a list?", "small"),
        ("List the built-in sequence types", "small"),
        ("Define a generator", "small"),
        ("When was Python 3 released?", "small"),
        ("Who wrote the tutorial?", "small"),
        ("Summarise the section on modules", "small"),
        ("Why are tuples immutable?", "large"),
        ("Explain closures", "large"),
        ("Compare lists and tuples", "large"),
        ("How does the import system work?", "large"),
        ("What is a list and why is it mutable?", "large"),  # reasoning wins
        ("Tuples?", "small"),  # nothing matched: the default
        ("what is " + "a very long question " * 20, "large"),  # long: reasoning
    ],
)
def test_default_rules(question: str, pool: str) -> None:
    assert QuestionClassifier().classify(question).pool == pool


def test_rules_from_config() -> None:
    classifier = QuestionClassifier.from_config(
        {"rules": [["large", r"\bsql\b"]], "long_chars": None, "default_pool": "small"}
    )
    decided = classifier.classify("Write SQL for this")
    assert (decided.pool, decided.detail) == ("large", r"rule 'large' /\bsql\b/")
    assert classifier.classify("why " * 500).pool == "small"  # no length rule, no why rule
    with pytest.raises(ValueError, match="regex"):
        QuestionClassifier.from_config({"rules": [["large", "("]]})
    with pytest.raises(ValueError, match="unknown keys"):
        QuestionClassifier.from_config({"rule": []})
    with pytest.raises(ValueError, match="pairs"):
        QuestionClassifier.from_config({"rules": ["why"]})


async def test_rules_must_name_configured_pools(tokenizer: HFTokenizer) -> None:
    with pytest.raises(ValueError, match="medium"):
        RoutedBackend.sglang(
            {"small": {"model": "m", "endpoints": ["http://a:1"]}},
            tokenizer=tokenizer,
            classifier=QuestionClassifier([("medium", "x")], long_pool="small"),
        )


# -- loads ---------------------------------------------------------------------------------


def waiting(fake: Fake, count: int) -> None:
    """``count`` requests in ``fake``'s waiting queue, as it reports them."""
    fake.server.batch.waiting[:] = [Turn(f"w{i}", 0, i) for i in range(count)]


async def test_the_least_loaded_endpoint_is_chosen(
    make_router: Callable[..., Awaitable[RoutedBackend]], fakes: tuple[Fake, Fake, Fake]
) -> None:
    a, b, _ = fakes
    router = await make_router()
    waiting(a, 3)  # the fake reports it as num_waiting_reqs
    await router.poll_once()
    assert router.endpoints[a.url].load.waiting == 3
    for _ in range(3):  # every time, not by turns
        assert router.choose(LOOKUP).endpoint == b.url
    waiting(a, 0)
    waiting(b, 2)
    await router.poll_once()
    assert router.choose(LOOKUP).endpoint == a.url
    waiting(b, 0)
    await router.poll_once()
    assert {router.choose(LOOKUP).endpoint for _ in range(4)} == {a.url, b.url}


async def test_polling_is_never_on_the_request_path(
    make_router: Callable[..., Awaitable[RoutedBackend]],
    fakes: tuple[Fake, Fake, Fake],
    tokenizer: HFTokenizer,
) -> None:
    router = await make_router()
    polled = [f.counter.count("/v1/loads") + f.counter.count("/metrics") for f in fakes]
    assert all(n >= 1 for n in polled)  # start() polled once
    await collect(router, prompt_for(tokenizer, LOOKUP))
    await collect(router, prompt_for(tokenizer, REASONING))
    after = [f.counter.count("/v1/loads") + f.counter.count("/metrics") for f in fakes]
    assert after == polled
    assert sum(f.counter.count("/generate") for f in fakes) == 2


async def test_the_poller_runs_in_the_background(
    make_router: Callable[..., Awaitable[RoutedBackend]], fakes: tuple[Fake, Fake, Fake]
) -> None:
    await make_router(poll_interval_s=0.05)
    deadline = time.monotonic() + 5
    while fakes[2].counter.count("/v1/loads") < 3:
        assert time.monotonic() < deadline, "the poller did not poll"
        await asyncio.sleep(0.02)


async def test_ttft_and_itl_are_read_from_metrics(
    make_router: Callable[..., Awaitable[RoutedBackend]],
    fakes: tuple[Fake, Fake, Fake],
    tokenizer: HFTokenizer,
) -> None:
    large = fakes[2]
    large.server.reset(ttft_s=0.2, itl_s=0.01, natural_tokens=4)
    router = await make_router()
    assert router.endpoints[large.url].ttft_ms is None
    await collect(router, prompt_for(tokenizer, REASONING))
    await router.poll_once()
    snap = router.endpoints[large.url]
    assert snap.ttft_ms is not None and 150 < snap.ttft_ms < 1000
    assert snap.itl_ms is not None and 5 < snap.itl_ms < 200


# -- the budget ----------------------------------------------------------------------------


async def test_the_budget_names_the_target_and_the_router_follows(
    make_router: Callable[..., Awaitable[RoutedBackend]],
    fakes: tuple[Fake, Fake, Fake],
    tokenizer: HFTokenizer,
    spans: InMemorySpanExporter,
) -> None:
    """One cost model decides: the router lists where an answer may go, the budget engine
    plans with each target's costs, and names the target; the router predicts nothing."""
    small, large = (fakes[0].url, fakes[1].url), fakes[2].url
    router = await make_router()
    targets = router.cost_targets(REASONING)
    assert targets[0] == large and targets[1] in small and len(targets) == 2
    assert router.cost_targets(LOOKUP)[0] in small and len(router.cost_targets(LOOKUP)) == 1
    assert router.choose(REASONING).reason == "classifier"
    planned = router.choose(REASONING, pool="small")
    assert (planned.pool, planned.reason) == ("small", "budget")
    assert "did not fit large" in planned.detail
    # Through stream(): the target the budget named.
    events, _ = await stream_in_span(
        router, prompt_for(tokenizer, REASONING), 16, target=targets[1]
    )
    (span,) = [s for s in spans.get_finished_spans() if s.name == "generate"]
    attrs = span.attributes or {}
    assert (attrs["ragtime.route.pool"], attrs["ragtime.route.reason"]) == ("small", "budget")
    decision = events[0]
    assert isinstance(decision, RouteDecision) and decision.pool == "small"
    assert decision.degradation is None  # the plan reports the smaller model, once
    assert decision.target in small and decision.model == "fake/small"


# -- failures ------------------------------------------------------------------------------


async def test_a_failed_endpoint_is_taken_out_and_probed_back(
    make_router: Callable[..., Awaitable[RoutedBackend]],
    fakes: tuple[Fake, Fake, Fake],
    tokenizer: HFTokenizer,
    spans: InMemorySpanExporter,
) -> None:
    small_a, small_b, large = fakes
    large.server.reset(reject_status=500)
    router = await make_router()
    events, trace_id = await stream_in_span(router, prompt_for(tokenizer, REASONING))
    assert isinstance(events[-1], GenerationDone)
    # Tried on the large endpoint, taken out, served by a small one.
    assert large.counter.count("/generate") == 1
    assert small_a.counter.count("/generate") + small_b.counter.count("/generate") == 1
    assert not router.endpoints[large.url].up
    (span,) = [s for s in spans.get_finished_spans() if s.name == "generate"]
    attrs = span.attributes or {}
    assert attrs["ragtime.route.pool"] == "small"
    assert attrs["ragtime.route.reason"] == "failover"
    assert attrs["gen_ai.request.model"] == "fake/small"
    assert [e.name for e in span.events] == ["ragtime.route.failover"]
    served = small_a.server.generate_requests + small_b.server.generate_requests
    assert trace_id in served[0].headers["traceparent"]  # the retry kept the span's context
    # While it is out, its pool fails over; the poller probes /health and brings it back.
    out = router.choose(REASONING)
    assert (out.pool, out.reason) == ("small", "failover")
    large.server.reset(healthy=False)
    await router.poll_once()
    assert not router.endpoints[large.url].up and large.counter.count("/ready") >= 1
    assert large.counter.count("/health") == 0
    large.server.reset()
    await router.poll_once()
    assert router.endpoints[large.url].up
    back = router.choose(REASONING)
    assert (back.pool, back.endpoint, back.reason) == ("large", large.url, "classifier")


async def test_an_endpoint_whose_poll_fails_is_skipped(
    make_router: Callable[..., Awaitable[RoutedBackend]],
    fakes: tuple[Fake, Fake, Fake],
    tokenizer: HFTokenizer,
) -> None:
    dead, sock = refused_url()
    with sock:
        router = await make_router(small=[dead, fakes[1].url])
        assert not router.endpoints[dead].up
        assert "poll failed" in router.endpoints[dead].reason
        for _ in range(3):
            assert router.choose(LOOKUP).endpoint == fakes[1].url
        await collect(router, prompt_for(tokenizer, LOOKUP))
        assert fakes[1].counter.count("/generate") == 1


async def test_every_endpoint_down_fails_at_the_first_event(
    make_router: Callable[..., Awaitable[RoutedBackend]],
    fakes: tuple[Fake, Fake, Fake],
    tokenizer: HFTokenizer,
) -> None:
    for fake in fakes:
        fake.server.reset(reject_status=500)
    router = await make_router()
    events = router.stream(prompt_for(tokenizer, LOOKUP), max_tokens=8)  # does not raise
    with pytest.raises(BackendUnavailable, match="no endpoint served"):
        async for event in events:
            assert isinstance(event, RouteDecision)  # one per endpoint tried, then the error
    assert sum(f.counter.count("/generate") for f in fakes) == 3  # each endpoint once
    assert not router.loaded
    with pytest.raises(BackendUnavailable, match="no endpoint is up"):
        await anext(router.stream(prompt_for(tokenizer, LOOKUP), max_tokens=8))


async def test_a_refused_request_does_not_take_the_endpoint_out(
    make_router: Callable[..., Awaitable[RoutedBackend]],
    fakes: tuple[Fake, Fake, Fake],
    tokenizer: HFTokenizer,
) -> None:
    fakes[2].server.reset(reject_status=400)
    router = await make_router()
    with pytest.raises(GenerationRejected, match="HTTP 400"):
        await collect(router, prompt_for(tokenizer, REASONING))
    assert router.endpoints[fakes[2].url].up
    assert fakes[0].counter.count("/generate") + fakes[1].counter.count("/generate") == 0


# -- spans ---------------------------------------------------------------------------------


async def test_the_route_goes_on_the_current_span(
    make_router: Callable[..., Awaitable[RoutedBackend]],
    fakes: tuple[Fake, Fake, Fake],
    tokenizer: HFTokenizer,
    spans: InMemorySpanExporter,
) -> None:
    router = await make_router()
    assert router.name == "sglang" and router.loaded
    _, trace_id = await stream_in_span(router, prompt_for(tokenizer, REASONING))
    (span,) = [s for s in spans.get_finished_spans() if s.name == "generate"]
    attrs = span.attributes or {}
    assert attrs["ragtime.route.pool"] == "large"
    assert attrs["ragtime.route.endpoint"] == fakes[2].url
    assert attrs["ragtime.route.reason"] == "classifier"
    assert attrs["ragtime.route.detail"] == r"rule 'large' /\bwhy\b/"
    assert attrs["gen_ai.request.model"] == "fake/large"
    assert REASONING not in str(dict(attrs))  # the question itself stays off the span
    assert trace_id in fakes[2].server.generate_requests[0].headers["traceparent"]


async def test_a_burst_with_invalid_requests_answers_every_valid_one(
    tokenizer: HFTokenizer,
) -> None:
    """2 pools x 2 endpoints, 50 requests at once, one in five with a prompt over the servers'
    context (a 200 then an error event, as SGLang sends it; the refusal names the context, and
    the prompt is then refused here, unsent): every valid request is answered, every invalid
    one rejected with the server's message, no endpoint taken out, nothing retried elsewhere."""
    fakes = [SimulatedSGLang() for _ in range(4)]
    with (
        ServerThread(fakes[0].app) as s1,
        ServerThread(fakes[1].app) as s2,
        ServerThread(fakes[2].app) as l1,
        ServerThread(fakes[3].app) as l2,
    ):
        for fake in fakes:
            fake.reset(itl_s=0.002, natural_tokens=6)
        router = RoutedBackend.sglang(
            {
                "small": {"model": "fake/small", "endpoints": [s1.url, s2.url]},
                "large": {"model": "fake/large", "endpoints": [l1.url, l2.url]},
            },
            tokenizer=tokenizer,
            options=RemoteOptions(poll_interval_s=None, stall_timeout_s=5.0),
        )
        await router.start()
        try:
            context = 300
            for fake in fakes:  # smaller than the client read: the servers must refuse
                fake.config.context_length = context

            async def one(i: int) -> str:
                question = LOOKUP if i % 2 else REASONING
                invalid = i % 5 == 4
                if invalid:
                    question += " and" * context  # a prompt over the context on its own
                prompt = prompt_for(tokenizer, question)
                try:
                    await collect(router, prompt, max_tokens=8)
                except GenerationRejected as exc:
                    assert "context length" in str(exc)
                    return "rejected" if invalid else f"valid {i} rejected: {exc}"
                return "answered" if not invalid else f"invalid {i} answered"

            outcomes = await asyncio.gather(*(one(i) for i in range(50)))
        finally:
            await router.close()
    assert outcomes.count("answered") == 40, outcomes
    assert outcomes.count("rejected") == 10, outcomes
    assert all(state.up for state in router.endpoints.values())
    sent = [r.body for f in fakes for r in f.generate_requests]
    assert len(sent) <= 50  # nothing retried; an invalid one unsent once its server refused one
    assert sum(len(body["input_ids"]) < context for body in sent) == 40  # every valid one sent
    assert all(f.generate_requests for f in fakes)  # both pools, both endpoints each
