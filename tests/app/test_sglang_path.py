"""The whole service answering through the SGLang backend, against the simulated SGLang server."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

from app.http.errors import install_error_handlers
from app.pipeline.calibration import fresh_prompt, probe_for
from app.pipeline.services import default_backend
from bench.sglang_sim.model import detokenize, output_ids
from bench.sglang_sim.server import SimulatedSGLang
from bench.sglang_sim.tokenizer import build_tiny_tokenizer
from inference import (
    AssembledPrompt,
    BackendBusy,
    GatewayClasses,
    GenerationRejected,
    HFTokenizer,
    OpenAICompatBackend,
    RemoteOptions,
    SGLangBackend,
    Urgency,
)
from tests.fakes._serve import ServerThread
from tests.helpers.app import asgi_client, build_app, make_settings, running_app
from tests.helpers.spans import attributes
from tests.helpers.sse import parse_sse


@pytest.fixture(scope="module")
def fake_sglang() -> Iterator[tuple[SimulatedSGLang, str]]:
    fake = SimulatedSGLang()
    with ServerThread(fake.app) as server:
        yield fake, server.url


def sglang_backend(url: str, tmp_path: Path, options: RemoteOptions | None = None) -> SGLangBackend:
    """The SGLang backend against the fake at ``url``, with the tests' tiny tokenizer."""
    tokenizer = HFTokenizer(build_tiny_tokenizer(tmp_path), local_files_only=True)
    return SGLangBackend([url], model="fake/tiny-chat", tokenizer=tokenizer, options=options)


def test_ask_is_answered_through_sglang(
    seeded_data_dir: Path,
    auth: dict[str, str],
    fake_sglang: tuple[SimulatedSGLang, str],
    span_exporter: InMemorySpanExporter,
    tmp_path: Path,
) -> None:
    fake, url = fake_sglang
    fake.reset(natural_tokens=10, itl_s=0.001)
    backend = sglang_backend(url, tmp_path)
    with running_app(
        seeded_data_dir, backend=backend, calibrate=False
    ) as client:  # counts /generate: no probes
        assert client.get("/readyz").status_code == 200
        span_exporter.clear()
        question = {"question": "How do I define a function with a default value?"}
        first = client.post("/v1/ask", json=question, headers=auth)
        assert first.status_code == 200, first.text
        streamed = client.post("/v1/ask", json={**question, "stream": True}, headers=auth)
        assert streamed.status_code == 200
    body = first.json()
    sent = fake.generate_requests[0]
    expected = detokenize(output_ids(sent.body["input_ids"], 10), final=True)
    assert body["answer"].strip() == expected.strip()
    assert body["finish_reason"] == "stop"
    assert body["trace_id"] in sent.headers["traceparent"]
    events = parse_sse(streamed.text.splitlines())
    done = [data for event, data in events if event == "done"]
    assert done and done[0]["finish_reason"] == "stop"
    generate = [s for s in span_exporter.get_finished_spans() if s.name == "generate"]
    first_span, second_span = attributes(generate[0]), attributes(generate[1])
    assert first_span["gen_ai.system"] == "sglang"
    assert first_span["gen_ai.request.model"] == "fake/tiny-chat"
    assert first_span["gen_ai.usage.input_tokens"] == len(sent.body["input_ids"])
    assert first_span["gen_ai.usage.output_tokens"] == 10
    assert first_span["gen_ai.response.finish_reasons"] == ("stop",)  # the SDK keeps tuples
    # The same question again: the fake's prefix cache serves all but the last prompt token.
    prompt_tokens = len(sent.body["input_ids"])
    assert second_span["ragtime.usage.cached_tokens"] == prompt_tokens - 1
    assert second_span["ragtime.usage.cached_ratio"] == round(
        (prompt_tokens - 1) / prompt_tokens, 4
    )
    assert first_span["ragtime.usage.cached_ratio"] == 0.0


def test_request_errors_and_busy_servers_map_to_their_statuses() -> None:
    """``GenerationRejected`` is the caller's error (400/422 with the server's message), never
    a 503; ``BackendBusy`` is a 503 with the Retry-After it names."""
    app = FastAPI()
    install_error_handlers(app, retry_after_s=5)

    @app.get("/rejected")
    async def rejected() -> None:
        raise GenerationRejected("sglang rejected the request: context length", status_code=422)

    @app.get("/busy")
    async def busy() -> None:
        raise BackendBusy("every endpoint is busy", retry_after_s=2.5)

    with TestClient(app) as client:
        answer = client.get("/rejected")
        assert answer.status_code == 422 and "Retry-After" not in answer.headers
        assert answer.json()["error"] == {
            "type": "generation_rejected",
            "message": "sglang rejected the request: context length",
        }
        full = client.get("/busy")
        assert full.status_code == 503 and full.headers["Retry-After"] == "3"
        assert full.json()["error"]["type"] == "backend_busy"


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ({"sglang_priority": 3}, "each request's deadline is its priority"),
        ({"smg_priority_classes": "urgent<10,bulk"}, "unknown SMG priority class 'urgent'"),
    ],
)
def test_settings_refuse_a_fixed_priority_and_unknown_classes(
    tmp_path: Path, setting: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        make_settings(tmp_path, generation_backend="sglang", **setting)


def test_settings_build_the_remote_backends(tmp_path: Path) -> None:
    sglang = default_backend(
        make_settings(
            tmp_path,
            generation_backend="sglang",
            sglang_endpoints=["http://a:30000", "http://b:30000/"],
            served_model="org/model",
            smg_priority_classes="interactive<1000,bulk",
        )
    )
    assert isinstance(sglang, SGLangBackend)
    assert sglang.endpoints == ["http://a:30000", "http://b:30000"]
    assert (sglang.model, sglang.incremental) == ("org/model", False)
    assert sglang.options.deadline_priority and not sglang.options.slo_headers
    assert sglang.options.gateway_classes == GatewayClasses((("interactive", 1000.0),), "bulk")
    assert sglang.options.stream_interval == 2  # the default: a chunk every 2 tokens
    own = make_settings(
        tmp_path,
        generation_backend="sglang",
        sglang_endpoints=["http://a:30000"],
        served_model="org/model",
        sglang_stream_interval=0,
    )
    own_backend = default_backend(own)
    assert isinstance(own_backend, SGLangBackend)
    assert own_backend.options.stream_interval is None
    assert isinstance(sglang.tokenizer, HFTokenizer)
    assert sglang.tokenizer.name_or_path == "org/model"
    openai = default_backend(
        make_settings(
            tmp_path,
            generation_backend="openai",
            openai_base_url="http://vllm:8000/v1",
            served_model="org/model",
            served_tokenizer="/models/tok",
            openai_api_key="sk-x",
        )
    )
    assert isinstance(openai, OpenAICompatBackend)
    assert openai.tokenizer.name_or_path == "/models/tok"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "overrides",
    [
        {"generation_backend": "sglang", "served_model": "m"},
        {"generation_backend": "sglang", "sglang_endpoints": ["http://a:1"]},
        {"generation_backend": "openai", "served_model": "m"},
        {"generation_backend": "sglang", "served_model": "m", "sglang_endpoints": ["a:1"]},
    ],
)
def test_remote_backends_need_their_settings(tmp_path: Path, overrides: dict[str, object]) -> None:
    with pytest.raises(ValidationError):  # the settings class is what fails, at start-up
        make_settings(tmp_path, **overrides)


def test_a_request_the_server_refuses_does_not_take_the_backend_out(
    seeded_data_dir: Path,
    auth: dict[str, str],
    fake_sglang: tuple[SimulatedSGLang, str],
    tmp_path: Path,
) -> None:
    fake, url = fake_sglang
    fake.reset(natural_tokens=4)
    # No background poll: the test polls when it means to. A poll between the refusal and the
    # server's change would read 20 (rightly, as the server then said), and none after it would
    # read the facts again.
    backend = sglang_backend(url, tmp_path, RemoteOptions(poll_interval_s=None))
    question = {"question": "How do I define a function with a default value?"}
    with running_app(seeded_data_dir, backend=backend) as client:
        fake.config.context_length = 20  # under what the client read: SGLang's 200 + error
        refused = client.post("/v1/ask", json=question, headers=auth)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["type"] == "generation_rejected"
        assert "context length" in refused.json()["error"]["message"]
        assert client.get("/readyz").status_code == 200  # the endpoint was not taken out
        assert backend.context_length == 20  # named by the refusal, and no prompt fits it
        fake.config.context_length = 8192
        assert client.portal is not None
        client.portal.call(backend.poll_once)  # the next poll reads the server's facts afresh
        assert backend.context_length == 8192, backend.states[url]
        answered = client.post("/v1/ask", json=question, headers=auth)
        assert answered.status_code == 200, answered.text
    assert backend.states[url].up


def test_a_fast_server_is_calibrated_and_a_tight_budget_gets_a_full_answer(
    seeded_data_dir: Path,
    auth: dict[str, str],
    fake_sglang: tuple[SimulatedSGLang, str],
    tmp_path: Path,
) -> None:
    """A server answering in about 250 ms (TTFT ~40 ms, 8 ms per token): a 900 ms budget must
    get a whole answer. Planned with our CPU's priors (2.5 ms per prompt token, 12 ms per
    output token), it was refused with a 504 in 36 ms."""
    fake, url = fake_sglang
    fake.reset(natural_tokens=24, ttft_s=0.04, itl_s=0.008)
    backend = sglang_backend(url, tmp_path)
    with running_app(seeded_data_dir, backend=backend, calibration_interval_s=0.05) as client:
        waited = time.monotonic() + 20
        while True:
            model = client.get("/v1/budget/model", headers=auth).json()
            if url in model["calibration"]["calibrated"]:
                break
            assert time.monotonic() < waited, model["calibration"]
            time.sleep(0.05)
        response = client.post(
            "/v1/ask",
            json={"question": "How do I define a function with a default value?", "budget_ms": 900},
            headers=auth,
        )
    prior = model["calibration"]["calibrated"][url]
    assert prior["decode_ms_per_token"] < 20 and prior["prefill_ms_per_token"] < 0.5
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["finish_reason"] == "stop"  # the whole answer, not cut by a cap or the deadline
    assert body["usage"]["completion_tokens"] == 24
    assert not body["budget"]["exceeded"]
    assert "context_reduced" not in [d["action"] for d in body["degradations"]]


def test_the_context_shrinks_to_fit_the_servers_context_length(
    seeded_data_dir: Path,
    auth: dict[str, str],
    fake_sglang: tuple[SimulatedSGLang, str],
    tmp_path: Path,
) -> None:
    fake, url = fake_sglang
    fake.reset(natural_tokens=8, context_length=420)
    backend = sglang_backend(url, tmp_path)
    with running_app(seeded_data_dir, backend=backend, calibrate=False) as client:
        response = client.post(
            "/v1/ask", json={"question": "How do I define a function?"}, headers=auth
        )
    assert response.status_code == 200, response.text
    body = response.json()
    reduced = [d for d in body["degradations"] if d["action"] == "context_reduced"]
    assert reduced and "context length is 420" in reduced[0]["reason"]
    sent = fake.generate_requests[-1].body
    assert len(sent["input_ids"]) + sent["sampling_params"]["max_new_tokens"] <= 420


async def test_a_64_slot_server_is_sent_64_answers_at_once_within_its_context(
    seeded_data_dir: Path,
    auth: dict[str, str],
    fake_sglang: tuple[SimulatedSGLang, str],
    tmp_path: Path,
) -> None:
    """SGLang 0.5.23 tells its batch only in /server_info's internal_states and /v1/loads, and
    its context only in /v1/models. Read there, a 64-slot server takes 64 answers at once: the
    server holds each until 64 run together, so nothing here depends on the machine's speed.
    Each prompt plus its output stays within the 4,096 tokens."""
    fake, url = fake_sglang
    fake.reset(max_running=64, context_length=4096, natural_tokens=6, start_together=64)
    backend = sglang_backend(url, tmp_path)
    app = build_app(
        seeded_data_dir,
        backend=backend,
        calibrate=False,
        max_output_tokens=4096,
        generation_backend="sglang",  # so that llama.cpp's window does not bound the output
        sglang_endpoints=[url],
        served_model="fake/tiny-chat",
    )
    async with asgi_client(app) as client:
        asks = [
            client.post(
                "/v1/ask",
                json={"question": f"What is list number {i}?", "budget_ms": 60000},
                headers=auth,
                timeout=90,
            )
            for i in range(64)
        ]
        answers = await asyncio.gather(*asks)
    statuses = Counter(a.status_code for a in answers)
    assert statuses == {200: 64}, [a.text for a in answers if a.status_code != 200][:1]
    assert fake.peak_running == 64
    for sent in fake.generate_requests:
        body = sent.body
        assert len(body["input_ids"]) + body["sampling_params"]["max_new_tokens"] <= 4096
    for answer in answers:  # 4,096 answer tokens would not fit beside the prompt: made to fit
        actions = {d["action"] for d in answer.json()["degradations"]}
        assert actions & {"context_reduced", "output_capped"}, answer.json()["degradations"]


def test_a_server_that_never_answered_is_named_with_its_state_not_still_starting(
    seeded_data_dir: Path, auth: dict[str, str], tmp_path: Path
) -> None:
    """Nothing listens at the endpoint: the 503 and /readyz say so, and since when (issue 24,
    "not reachable, not ready after N s" instead of "still starting")."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"  # closed once the block ends
    backend = sglang_backend(url, tmp_path)
    with running_app(seeded_data_dir, backend=backend, calibrate=False) as client:
        ready = client.get("/readyz", headers=auth)  # an admin's key: what each part says
        answer = client.post("/v1/ask", json={"question": "What is a list?"}, headers=auth)
    assert ready.status_code == 503
    generator = ready.json()["components"]["generator"]
    assert generator.startswith("not loaded: sglang: no endpoint is serving ")
    assert f"{url} down (" in generator and "still starting" not in generator
    assert answer.status_code == 503, answer.text
    message = answer.json()["error"]["message"]
    assert re.search(
        r"no endpoint is serving \d+ s after start: http://127\.0\.0\.1:\d+ down", message
    )


async def test_a_calibration_probe_goes_first_where_the_server_orders_by_deadline(
    fake_sglang: tuple[SimulatedSGLang, str], tmp_path: Path
) -> None:
    """A probe times the server's pace: on a server scheduling by priority, sent without one it
    would wait behind (or be preempted by) every request with a deadline, and teach a pace
    seven times too slow (seen in `ragtime bench overload`). It is due at once instead."""
    fake, url = fake_sglang
    fake.reset(priority_scheduling=True, max_running=1, itl_s=0.02, natural_tokens=200)
    backend = sglang_backend(url, tmp_path, RemoteOptions(poll_interval_s=None))
    await backend.start()
    try:
        prompt = fresh_prompt(backend, 16)
        loose = Urgency(time.perf_counter() + 5.0, 50.0, 10.0, 100)
        running = asyncio.create_task(drain(backend, prompt, loose))
        while not any(s.output for s in fake.states.values()):
            await asyncio.sleep(0.005)
        result = await probe_for(backend.endpoint(url))(16, 4)
        await running
    finally:
        await backend.close()
    first, probe = fake.generate_requests
    assert probe.body["priority"] > first.body["priority"], "higher values first: more urgent"
    assert ("preempted", first.body["rid"]) in fake.events
    assert result.output_tokens == 4


async def drain(backend: SGLangBackend, prompt: AssembledPrompt, urgency: Urgency) -> None:
    async for _ in backend.stream(prompt, max_tokens=100, urgency=urgency):
        pass
