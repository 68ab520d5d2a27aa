"""The SGLang backend with SGLang's gateway as its endpoint, as deploy/k8s runs it: a pool's one
URL is the gateway (tests/fakes/sglang_gateway.py) in front of two workers (the fake server)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from inference import (
    HFTokenizer,
    PromptAssembler,
    RemoteOptions,
    SGLangBackend,
    TextDelta,
)
from inference._endpoints import EndpointState
from tests.fakes._serve import ServerThread
from tests.fakes.passages import Doc
from tests.fakes.sglang_gateway import FakeGateway
from tests.fakes.sglang_server import FakeSGLang

PASSAGES = [Doc("Lists are mutable sequences."), Doc("Tuples are not mutable.", section="Tuples")]


@pytest.fixture(scope="module")
def pool() -> Iterator[tuple[FakeSGLang, FakeSGLang, str]]:
    a, b = FakeSGLang(), FakeSGLang()
    with ServerThread(a.app) as sa, ServerThread(b.app) as sb:
        gateway = FakeGateway([sa.url, sb.url])
        with ServerThread(gateway.app) as served:
            yield a, b, served.url


@pytest.fixture
def fakes(pool: tuple[FakeSGLang, FakeSGLang, str]) -> tuple[FakeSGLang, FakeSGLang, str]:
    for worker in pool[:2]:
        worker.reset(health_s=0.0, ttft_s=0.02, itl_s=0.005, natural_tokens=4, max_running=8)
    return pool


@pytest.fixture
async def backend(
    fakes: tuple[FakeSGLang, FakeSGLang, str], tokenizer: HFTokenizer
) -> AsyncIterator[SGLangBackend]:
    options = RemoteOptions(stall_timeout_s=5.0, poll_interval_s=None)
    b = SGLangBackend([fakes[2]], model="fake/tiny-chat", tokenizer=tokenizer, options=options)
    yield b
    await b.close()


async def answer(backend: SGLangBackend, tokenizer: HFTokenizer) -> str:
    prompt = PromptAssembler(tokenizer, context_tokens=200).assemble("What is a list?", PASSAGES)
    text = ""
    async for event in backend.stream(prompt, max_tokens=8):
        if isinstance(event, TextDelta):
            text += event.text
    return text


async def test_the_fake_gateway_routes_what_the_real_one_does(fakes: Any) -> None:
    """sgl-model-gateway's src/server.rs: no /ready, /metrics or /abort_request on its port."""
    async with httpx.AsyncClient(base_url=fakes[2]) as client:
        for path in ("/ready", "/metrics"):
            assert (await client.get(path)).status_code == 404
        assert (await client.post("/abort_request", json={"rid": "x"})).status_code == 404
        assert (await client.get("/health")).status_code == 200
        loads = (await client.get("/v1/loads")).json()["loads"]
        assert [set(x) for x in loads] == [{"worker", "worker_type", "load"}] * 2
        metrics = (await client.get("/engine_metrics")).text
    assert "sglang_num_queue_reqs{" in metrics and "sglang:" not in metrics
    assert metrics.count("worker_addr=") >= 2


async def test_a_gateway_endpoint_joins_and_answers(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    await backend.start()
    assert backend.loaded
    state = backend.states[fakes[2]]
    assert state.up and state.context_length == fakes[0].config.context_length
    text = await answer(backend, tokenizer)
    assert text
    assert len(fakes[0].generate_requests) + len(fakes[1].generate_requests) == 1


async def test_the_pools_load_and_latency_come_from_the_workers_metrics(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    await backend.start()
    load = backend.target_load(fakes[2])
    assert load is not None and load.max_running == 8 * 2, "two workers, 8 slots each"
    for _ in range(2):  # one answer from each worker (round robin)
        await answer(backend, tokenizer)
    await backend.poll_once()
    load = backend.target_load(fakes[2])
    assert load is not None and load.running == 0 and load.waiting == 0
    assert load.ttft_ms is not None and 10 < load.ttft_ms < 1000
    assert load.itl_ms is not None and 1 < load.itl_ms < 500


async def test_a_gateway_without_a_healthy_worker_is_not_ready(
    backend: SGLangBackend, fakes: Any
) -> None:
    """Its /health is liveness (always 200): the poll must ask /readiness, and obey its 503."""
    for worker in fakes[:2]:
        worker.config.healthy = False
    await backend.start()
    assert not backend.loaded
    assert "/readiness answered 503" in backend.states[fakes[2]].reason
    fakes[1].config.healthy = True
    assert await backend.check_health() and backend.loaded


def test_gateway_loads_without_counts_use_the_metrics() -> None:
    state = EndpointState("http://gateway:30000")
    state.max_running = 4
    loads = {"loads": [{"worker": "http://a", "load": -1}, {"worker": "http://b", "load": -1}]}
    metrics = {"sglang:num_running_reqs": 5.0, "sglang:num_queue_reqs": 3.0}
    state.read_load(loads, metrics)
    assert state.load is not None
    assert (state.load.running, state.load.waiting, state.load.max_running) == (5, 3, 8)
    # A server's own /v1/loads keeps its counts (and its one batch).
    state.read_load({"loads": [{"num_running_reqs": 2, "num_waiting_reqs": 1}]}, metrics)
    assert (state.load.running, state.load.waiting, state.load.max_running) == (2, 1, 4)
