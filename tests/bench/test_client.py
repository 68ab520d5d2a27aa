"""The SSE client against tiny servers: token, done and error events, HTTP errors, timeouts."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from bench.harness.client import Target, ask_stream, make_client
from bench.harness.serve import floor_server

DONE: dict[str, Any] = {
    "citations": [],
    "trace_id": "0" * 32,
    "timings_ms": {"auth": 0.5, "embed": 4.25, "generate": 20.0},
    "budget": {"budget_ms": 1000.0, "spent_ms": 30.0, "remaining_ms": 970.0, "exceeded": False},
    "degradations": [{"stage": "rerank", "action": "rerank_skipped", "reason": "no model"}],
    "usage": {"prompt_tokens": 10, "cached_tokens": 0, "completion_tokens": 3},
    "finish_reason": "stop",
    "model": "scripted",
}


def scripted_app() -> FastAPI:
    """Answers by question: ``ok``, ``late`` (over budget), ``fail`` midway, ``401``, ``hang``."""
    app = FastAPI()

    @app.post("/v1/ask")
    async def ask(body: dict[str, object]) -> object:
        question = body["question"]
        if question == "401":
            error = {"error": {"type": "unauthorized", "message": "bad key"}}
            return JSONResponse(error, status_code=401)

        async def events() -> AsyncIterator[dict[str, str]]:
            yield {"event": "citations", "data": json.dumps({"citations": []})}
            await asyncio.sleep(0.01)
            for text in ("The answer", " is", " [1]."):
                yield {"event": "token", "data": json.dumps({"text": text})}
                await asyncio.sleep(0.01)
                if question == "fail":
                    error = {"error": {"type": "generation_failed", "message": "decoder crashed"}}
                    yield {"event": "error", "data": json.dumps(error)}
                    return
                if question == "hang":
                    await asyncio.sleep(10)
            done: dict[str, Any] = dict(DONE)
            if question == "no usage":
                done["usage"] = None
            if question == "late":
                done["budget"] = {**DONE["budget"], "budget_ms": 5.0, "exceeded": True}
            yield {"event": "done", "data": json.dumps(done)}

        return EventSourceResponse(events())

    return app


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=scripted_app())
    async with httpx.AsyncClient(transport=transport) as c:
        yield c


TARGET = Target("scripted", "http://test", "secret")


async def test_a_full_answer(client: httpx.AsyncClient) -> None:
    record = await ask_stream(client, TARGET, "ok", index=3, budget_ms=1000)
    assert record.outcome == "ok" and record.status == 200 and record.error is None
    assert record.tokens == 3 and len(record.itl_ms) == 2
    assert record.ttft_ms is not None and record.e2e_ms is not None
    assert 0 < record.ttft_ms <= record.e2e_ms
    assert record.evidence_ms is not None and 0 < record.evidence_ms < record.ttft_ms
    assert record.itl_ms_mean is not None and record.itl_ms_max is not None
    assert record.timings_ms == DONE["timings_ms"]
    assert record.degradations == ["rerank_skipped"]
    assert record.budget_ms == 1000.0 and record.budget_exceeded is False
    assert record.within_budget and record.finish_reason == "stop" and record.index == 3
    assert (record.prompt_tokens, record.cached_tokens, record.completion_tokens) == (10, 0, 3)


async def test_over_budget(client: httpx.AsyncClient) -> None:
    record = await ask_stream(client, TARGET, "late")
    assert record.outcome == "ok" and record.budget_exceeded is True
    assert record.budget_ms == 5.0 and not record.within_budget


async def test_a_done_event_without_usage(client: httpx.AsyncClient) -> None:
    record = await ask_stream(client, TARGET, "no usage")
    assert record.outcome == "ok"
    assert (record.prompt_tokens, record.cached_tokens, record.completion_tokens) == (None,) * 3


async def test_an_error_event_midstream(client: httpx.AsyncClient) -> None:
    record = await ask_stream(client, TARGET, "fail")
    assert record.outcome == "stream_error" and record.status == 200 and record.tokens == 1
    assert record.error == "generation_failed: decoder crashed"
    assert not record.within_budget and record.e2e_ms is not None


async def test_an_http_error(client: httpx.AsyncClient) -> None:
    record = await ask_stream(client, TARGET, "401")
    assert record.outcome == "http_error" and record.status == 401
    assert record.error == "unauthorized: bad key" and record.ttft_ms is None


async def test_a_request_that_hangs_times_out(client: httpx.AsyncClient) -> None:
    record = await ask_stream(client, TARGET, "hang", timeout_s=0.3)
    assert record.outcome == "timeout" and not record.within_budget
    assert record.error == "no answer within 0.3 s"


async def test_latency_runs_from_when_the_request_was_due(client: httpx.AsyncClient) -> None:
    due = time.perf_counter() - 0.5  # sent half a second late
    record = await ask_stream(client, TARGET, "ok", due=due, phase_start=due - 1.0)
    assert record.start_lag_ms >= 500 and record.ttft_ms is not None and record.ttft_ms >= 500
    assert record.scheduled_s == pytest.approx(1.0)


async def test_no_server_is_a_transport_error() -> None:
    async with make_client(timeout_s=2.0) as client:
        record = await ask_stream(client, Target("gone", "http://127.0.0.1:9"), "ok")
    assert record.outcome == "transport_error" and record.status == 0


@pytest.mark.process
async def test_the_floor_streams_its_tokens_over_real_http() -> None:
    with floor_server(5) as server:
        async with make_client() as client:
            records = [
                await ask_stream(client, Target("floor", server.url), "q", budget_ms=100)
                for _ in range(3)
            ]
    for record in records:
        assert record.outcome == "ok" and record.tokens == 5 and len(record.itl_ms) == 4
        assert record.budget_ms == 100 and record.budget_exceeded is None
        assert record.timings_ms == {} and record.degradations == []
