"""The SGLang backend behind SGLang's real gateway, as deploy/k8s runs it: a pool's one URL is
the gateway (the PyPI binary, both pinned releases: ``tests/helpers/sglang_gateway.py``) in
front of two simulated SGLang 0.5.23 workers (``bench/sglang_sim``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.sglang_sim.server import SimulatedSGLang
from inference import (
    GenerationDone,
    HFTokenizer,
    PromptAssembler,
    RemoteOptions,
    RoutedBackend,
    RouteDecision,
    SGLangBackend,
    TargetLoad,
    TextDelta,
    Urgency,
)
from inference.remote.endpoints import EndpointState
from inference.remote.scheduling import deadline_priority
from tests.fakes._serve import ServerThread
from tests.fakes.passages import Doc
from tests.helpers.sglang_gateway import RELEASES, Gateway, sglang_gateway

PASSAGES = [Doc("Lists are mutable sequences."), Doc("Tuples are not mutable.", section="Tuples")]
WORKER = {"health_s": 0.0, "ttft_s": 0.02, "itl_s": 0.005, "natural_tokens": 4, "max_running": 8}


class Pool:
    """Two simulated workers behind one gateway, and a third worker kept aside."""

    def __init__(self, gateway: Gateway, workers: list[SimulatedSGLang], urls: list[str]) -> None:
        self.gateway = gateway
        self.workers = workers
        self.urls = urls

    @property
    def url(self) -> str:
        return self.gateway.url

    def states(self) -> list[Any]:
        return [s for w in self.workers for s in w.states.values()]


@pytest.fixture(scope="module", params=sorted(RELEASES))
def pool(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Pool]:
    workers = [SimulatedSGLang() for _ in range(3)]
    for worker in workers:
        worker.reset(**WORKER)
    with (
        ServerThread(workers[0].app) as a,
        ServerThread(workers[1].app) as b,
        ServerThread(workers[2].app) as spare,
    ):
        log_dir = tmp_path_factory.mktemp("gateway")
        with sglang_gateway(request.param, [a.url, b.url], log_dir=log_dir) as gateway:
            yield Pool(gateway, workers, [a.url, b.url, spare.url])


@pytest.fixture
def fresh(pool: Pool) -> Pool:
    for worker in pool.workers:
        worker.reset(**WORKER)
    pool.gateway.wait_workers(2)
    return pool


@pytest.fixture
async def make_backend(tokenizer: HFTokenizer) -> AsyncIterator[Callable[..., SGLangBackend]]:
    made: list[SGLangBackend] = []

    def make(url: str, **kwargs: Any) -> SGLangBackend:
        kwargs.setdefault("stall_timeout_s", 5.0)
        kwargs.setdefault("poll_interval_s", None)
        options = RemoteOptions(**kwargs)
        backend = SGLangBackend([url], model="fake/tiny-chat", tokenizer=tokenizer, options=options)
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.close()


async def answer(
    backend: SGLangBackend | RoutedBackend,
    tokenizer: HFTokenizer,
    question: str = "What is a list?",
    max_tokens: int = 8,
) -> tuple[str, GenerationDone, list[RouteDecision]]:
    prompt = PromptAssembler(tokenizer, context_tokens=200).assemble(question, PASSAGES)
    text, done, routes = "", None, []
    async for event in backend.stream(prompt, max_tokens=max_tokens):
        if isinstance(event, TextDelta):
            text += event.text
        elif isinstance(event, RouteDecision):
            routes.append(event)
        else:
            done = event
    assert done is not None
    return text, done, routes


async def eventually(check: Callable[[], bool], timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "not within the time allowed"
        await asyncio.sleep(0.05)


async def load_once_counted(
    backend: SGLangBackend, url: str, *, expected: int, timeout_s: float = 15.0
) -> TargetLoad:
    """The endpoint's load, polled until the gateway counts ``expected`` requests running or
    waiting: its gauges may lag the workers' own count by a moment on a busy machine (three
    ``make test`` runs at once on 2 cores read 0 at the first poll)."""
    deadline = time.monotonic() + timeout_s
    while True:
        await backend.poll_once()
        load = backend.target_load(url)
        if load is not None and load.running + load.waiting == expected:
            return load
        assert time.monotonic() < deadline, load
        await asyncio.sleep(0.05)


@pytest.mark.process
async def test_ragtime_joins_the_gateway_and_answers_with_cached_tokens(
    fresh: Pool, make_backend: Callable[..., SGLangBackend], tokenizer: HFTokenizer
) -> None:
    backend = make_backend(fresh.url)
    await backend.start()
    state = backend.states[fresh.url]
    assert backend.loaded and state.up and state.kind == "gateway", state.reason
    first, done, _ = await answer(backend, tokenizer)
    assert first and done.finish_reason == "stop"
    again, repeat, _ = await answer(backend, tokenizer)  # cache_aware: the same worker
    assert again == first
    assert repeat.usage.cached_tokens >= repeat.usage.prompt_tokens - 1 > 0
    assert len(fresh.states()) == 2
    # Nothing was asked that the gateway does not route.
    assert not any(w.aborts for w in fresh.workers)


@pytest.mark.process
async def test_the_gateway_drops_a_requests_stream_interval(
    fresh: Pool, make_backend: Callable[..., SGLangBackend], tokenizer: HFTokenizer
) -> None:
    """Both gateways rebuild ``sampling_params`` from the fields they know, and
    ``stream_interval`` is not one: behind a gateway only the workers' own
    ``--stream-interval`` counts (``RAGTIME_SGLANG_STREAM_INTERVAL`` says so; the deployments
    start their workers with it). Should a gateway pass it on, this fails: then the setting
    works behind it too."""
    backend = make_backend(fresh.url, stream_interval=3)
    await backend.start()
    prompt = PromptAssembler(tokenizer, context_tokens=200).assemble("What is a list?", PASSAGES)
    async for _ in backend.stream(prompt, max_tokens=12):
        pass
    sent = [r.body for w in fresh.workers for r in w.generate_requests]
    assert len(sent) == 1
    assert sent[0]["sampling_params"]["max_new_tokens"] == 12  # what it knows goes on
    assert "stream_interval" not in sent[0]["sampling_params"]


@pytest.mark.process
async def test_the_deadline_goes_through_smg_as_the_workers_priority(
    fresh: Pool, make_backend: Callable[..., SGLangBackend], tokenizer: HFTokenizer
) -> None:
    """Workers that schedule by priority: smg passes its first healthy worker's
    ``/get_server_info`` on, so ragtime learns the order and sends each deadline as the
    request's ``priority``, which smg forwards (an ``i32``). sglang-router 0.3.2 describes
    itself there: ragtime cannot tell, and sends none."""
    for worker in fresh.workers:
        worker.reset(**WORKER, priority_scheduling=True)
    backend = make_backend(fresh.url)
    await backend.start()
    prompt = PromptAssembler(tokenizer, context_tokens=200).assemble("What is a list?", PASSAGES)
    urgency = Urgency(time.perf_counter() + 3.0, 50.0, 5.0, 8)
    async for event in backend.stream(prompt, max_tokens=8, urgency=urgency):
        assert not (isinstance(event, GenerationDone) and event.finish_reason != "stop")
    [sent] = [r.body for w in fresh.workers for r in w.generate_requests]
    if fresh.gateway.release == "smg":
        expected = deadline_priority(urgency.deadline, "higher_first")
        assert abs(sent["priority"] - expected) <= 2
    else:
        assert "priority" not in sent


@pytest.mark.process
async def test_facts_and_load_come_from_the_gateways_own_routes(
    fresh: Pool, make_backend: Callable[..., SGLangBackend], tokenizer: HFTokenizer
) -> None:
    """sglang-router 0.3.2 tells neither the context length nor the batch (the configured
    fallbacks stand); smg tells both (its workers' labels, its first worker's server info)."""
    backend = make_backend(fresh.url, context_length=2048, max_running=4)
    await backend.start()
    state = backend.states[fresh.url]
    assert state.workers == 2
    if fresh.gateway.release == "smg":
        assert state.context_length == 8192  # the workers' max_model_len, not the fallback
        assert state.max_running == 8
    else:
        assert (state.context_length, state.max_running) == (2048, 4)
    load = backend.target_load(fresh.url)
    assert (
        load is not None
        and state.max_running is not None
        and load.max_running == 2 * state.max_running
    )
    # A slow pair of answers is running: the pool's live gauges count them, and a load the
    # gateway does not know (-1) leaves the endpoint up.
    for worker in fresh.workers:
        worker.config.itl_s = 0.05
    running = [asyncio.create_task(answer(backend, tokenizer, q, 40)) for q in ("a?", "b?")]
    await eventually(lambda: sum(len(w._active) for w in fresh.workers) == 2)
    load = await load_once_counted(backend, fresh.url, expected=2)
    assert state.up and load.running + load.waiting == 2, load
    await asyncio.gather(*running)
    await backend.poll_once()
    load = backend.target_load(fresh.url)
    assert load is not None and load.running == 0
    assert state.ttft_ms is not None and state.itl_ms is not None  # the workers' histograms


@pytest.mark.process
async def test_an_answer_too_long_for_the_workers_context_is_capped_to_fit(
    fresh: Pool, make_backend: Callable[..., SGLangBackend], tokenizer: HFTokenizer
) -> None:
    """smg tells the workers' context (its labels); sglang-router does not, and then the
    worker's refusal names it: either way the answer is capped to fit, not refused."""
    prompt = PromptAssembler(tokenizer, context_tokens=200).assemble("What is a list?", PASSAGES)
    context = len(prompt.token_ids) + 10
    for worker in fresh.workers:
        worker.reset(**{**WORKER, "context_length": context, "natural_tokens": 500})
    backend = make_backend(fresh.url)
    await backend.start()
    events = [e async for e in backend.stream(prompt, max_tokens=64)]
    done = events[-1]
    assert isinstance(done, GenerationDone) and done.finish_reason == "length"
    assert done.usage.prompt_tokens + done.usage.completion_tokens == context
    capped = [e for e in events if isinstance(e, RouteDecision) and e.degradation]
    assert capped and capped[-1].degradation is not None
    assert capped[-1].degradation[0] == "output_capped"
    assert backend.context_length == context


@pytest.mark.process
async def test_a_dropped_client_stops_the_workers_decoding(
    fresh: Pool, make_backend: Callable[..., SGLangBackend], tokenizer: HFTokenizer
) -> None:
    """No /abort_request through the gateway: closing the stream is the abort."""
    for worker in fresh.workers:
        worker.reset(**{**WORKER, "itl_s": 0.02, "natural_tokens": 5000})
    backend = make_backend(fresh.url)
    await backend.start()
    prompt = PromptAssembler(tokenizer, context_tokens=200).assemble("Why?", PASSAGES)
    events = backend.stream(prompt, max_tokens=2000)
    async for event in events:
        if isinstance(event, TextDelta):
            break
    await events.aclose()
    (state,) = fresh.states()
    await eventually(lambda: state.finish_reason is not None)
    assert state.finish_reason is not None and state.finish_reason["type"] == "abort"
    assert state.stream_end == "disconnected" and len(state.output) < 1000
    assert not any(w.aborts for w in fresh.workers)


@pytest.mark.process
async def test_readiness_follows_the_gateways_healthy_workers(
    fresh: Pool, make_backend: Callable[..., SGLangBackend]
) -> None:
    backend = make_backend(fresh.url)
    await backend.start()
    assert backend.loaded
    for worker in fresh.workers:
        worker.config.healthy = False
    fresh.gateway.wait_workers(0)
    assert not await backend.check_health()
    assert "/readiness answered 503" in backend.states[fresh.url].reason
    for worker in fresh.workers:
        worker.config.healthy = True
    fresh.gateway.wait_workers(2)
    assert await backend.check_health() and backend.loaded


@pytest.mark.process
async def test_an_empty_pool_fails_over_and_is_used_again_when_it_comes_back(
    fresh: Pool, tokenizer: HFTokenizer, tmp_path: Path
) -> None:
    """The large pool's gateway loses its only worker between two polls: its /generate answer
    (smg: 404 model_not_found; 0.3.2: 503 no_available_workers) sends the request to the small
    pool, not back to the caller as a configuration error. When a worker is registered again,
    the next poll brings the pool back."""
    spare = fresh.urls[2]
    with sglang_gateway(fresh.gateway.release, [spare], log_dir=tmp_path) as large:
        options = RemoteOptions(stall_timeout_s=5.0, poll_interval_s=None)
        backend = RoutedBackend.sglang(
            {
                "small": {"model": "fake/tiny-chat", "endpoints": [fresh.url]},
                "large": {"model": "fake/tiny-chat", "endpoints": [large.url]},
            },
            tokenizer=tokenizer,
            options=options,
        )
        await backend.start()
        try:
            long_question = "Explain why lists are mutable."
            _, _, routes = await answer(backend, tokenizer, long_question)
            assert routes[-1].pool == "large"
            large.remove_worker(spare)
            large.wait_workers(0)
            text, done, routes = await answer(backend, tokenizer, long_question)
            assert text and done.finish_reason == "stop"
            assert [r.pool for r in routes] == ["large", "small"], routes
            assert routes[-1].reason == "failover"
            state = backend.endpoints[large.url]
            assert not state.up and "no worker serves the model" in state.reason, state.reason
            large.add_worker(spare)
            large.wait_workers(1)
            await backend.poll_once()
            _, _, routes = await answer(backend, tokenizer, long_question)
            assert [r.pool for r in routes] == ["large"]
        finally:
            await backend.close()


def test_a_gateway_load_of_minus_one_is_unknown_not_down() -> None:
    """sglang-router 0.3.2's ``/get_loads`` for 0.5.23 workers (no ``/get_load``): the counts
    come from the workers' gauges, and the capacity from the healthy workers' batch."""
    state = EndpointState("http://gateway:30000", max_running=16)
    state.read_readiness({"status": "ready", "healthy_workers": 2, "total_workers": 2})
    loads = {"workers": [{"worker": "http://a", "load": -1}, {"worker": "http://b", "load": -1}]}
    metrics = {"sglang:num_running_reqs": 5.0, "sglang:num_queue_reqs": 3.0}
    state.read_gateway_load(loads, metrics)
    assert (state.load.running, state.load.waiting, state.load.max_running) == (5, 3, 32)
    state.read_gateway_load(loads, {})
    assert (state.load.running, state.load.waiting) == (0, 0)


def test_smg_load_entries_carry_counts_and_batches() -> None:
    state = EndpointState("http://gateway:30000")
    loads = {
        "loads": [
            {"worker": "http://a", "num_running_reqs": 3, "num_waiting_reqs": 1,
             "max_running_requests": 64},
            {"worker": "http://b", "num_running_reqs": 2, "num_waiting_reqs": 0,
             "max_running_requests": 64},
        ],
        "aggregate": {"total_running_reqs": 5},
    }  # fmt: skip
    state.read_gateway_load(loads, {})
    assert (state.load.running, state.load.waiting, state.load.max_running) == (5, 1, 128)


@pytest.mark.process
async def test_the_gateways_generate_without_workers_names_an_empty_pool(tmp_path: Path) -> None:
    for release in sorted(RELEASES):
        with sglang_gateway(release, [], log_dir=tmp_path) as gateway:
            async with httpx.AsyncClient(base_url=gateway.url) as client:
                body = {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 2}}
                response = await client.post("/generate", json=body)
            error = response.json()["error"]
            assert (response.status_code, error["code"]) in {
                (404, "model_not_found"),
                (503, "no_available_workers"),
            }, (release, response.text)
