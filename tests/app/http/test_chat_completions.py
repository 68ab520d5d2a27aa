"""The OpenAI-compatible face, through the official ``openai`` client: chat completions (whole
and streamed), the model list, and errors in OpenAI's shape. What the routes send is checked
against the package's own types (``ChatCompletion``, ``ChatCompletionChunk``), validated, not
merely constructed as the client does."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import openai
import pytest
from fastapi import FastAPI
from openai.types import Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam

from inference import GenerationBackend
from tests.fakes.backends import ScriptedBackend, failing_midstream_backend, unavailable_backend
from tests.helpers.app import build_app, served
from tests.helpers.openai_clients import asgi_openai

QUESTION = "What is a list?"
CONVERSATION: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "You answer questions about Python."},
    {"role": "user", "content": "What is a tuple?"},
    {"role": "assistant", "content": "A tuple is an immutable sequence [1]."},
    {"role": "user", "content": QUESTION},
]
BODY: dict[str, Any] = {"model": "ragtime", "messages": CONVERSATION}


def openai_app(data_dir: Path, backend: GenerationBackend | None = None) -> FastAPI:
    return build_app(data_dir, backend=backend or ScriptedBackend())


def auth_of(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def data_lines(text: str) -> list[str]:
    return [line[len("data:") :].strip() for line in text.splitlines() if line.startswith("data:")]


def error_of(exc: openai.APIStatusError) -> dict[str, Any]:
    """The error object as sent: exactly OpenAI's four fields."""
    body = exc.response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    error: dict[str, Any] = body["error"]
    return error


async def test_the_models_list_names_ragtime_and_the_backends_model(
    seeded_data_dir: Path, api_key: str
) -> None:
    async with asgi_openai(openai_app(seeded_data_dir), api_key) as api:
        models = [m async for m in api.client.models.list()]
        raw = (await api.http.get("/v1/models", headers=auth_of(api_key))).json()
    assert [m.id for m in models] == ["ragtime", ScriptedBackend.model]
    assert raw["object"] == "list"
    for entry in raw["data"]:
        Model.model_validate(entry, strict=True)
    assert {m.owned_by for m in models} == {"ragtime", ScriptedBackend.name}


async def test_a_completion_answers_the_last_user_message_with_citations(
    seeded_data_dir: Path, api_key: str
) -> None:
    async with asgi_openai(openai_app(seeded_data_dir), api_key) as api:
        completion = await api.client.chat.completions.create(
            model="ragtime", messages=CONVERSATION
        )
        raw = await api.http.post("/v1/chat/completions", json=BODY, headers=auth_of(api_key))
        asked = await api.http.post(
            "/v1/ask", json={"question": QUESTION}, headers=auth_of(api_key)
        )
    ChatCompletion.model_validate(raw.json(), strict=True)
    assert raw.headers["Server-Timing"].endswith(tuple("0123456789"))
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == "ragtime"
    assert abs(completion.created - time.time()) < 60
    [choice] = completion.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == "The answer is in [1]."
    assert choice.finish_reason == "stop"
    usage = completion.usage
    assert usage is not None and usage.completion_tokens == 3
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens > 3
    extra = completion.model_extra or {}
    # The same content as /v1/ask's citations, for the same question.
    assert extra["citations"] == asked.json()["citations"]
    assert extra["citations"] and extra["citations"][0]["cited"] is True
    assert extra["budget"]["budget_ms"] == 15000
    assert isinstance(extra["degradations"], list) and extra["trace_id"]
    assert extra["ragtime_finish_reason"] == "stop"


async def test_a_streamed_completion_through_the_client(
    seeded_data_dir: Path, api_key: str
) -> None:
    async with asgi_openai(openai_app(seeded_data_dir), api_key) as api:
        stream = await api.client.chat.completions.create(
            model=ScriptedBackend.model,
            messages=CONVERSATION,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "The answer is in [1]."
    finishing = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert [c.choices[0].finish_reason for c in finishing] == ["stop"]
    extra = finishing[0].model_extra or {}
    assert extra["citations"][0]["label"] == 1 and extra["citations"][0]["cited"] is True
    assert extra["budget"]["budget_ms"] == 15000 and "degradations" in extra
    assert extra["server_timing"].startswith("auth;dur=")
    # The first chunk names the trace at once, as an extension field the client keeps.
    assert (chunks[0].model_extra or {})["trace_id"] == extra["trace_id"]
    # include_usage: one last chunk with the usage and no choice, null usage before it.
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None and last.usage.completion_tokens == 3
    assert all(c.usage is None for c in chunks[:-1])
    assert {c.id for c in chunks} == {chunks[0].id} and chunks[0].model == ScriptedBackend.model


async def test_a_stream_is_chunks_then_done(seeded_data_dir: Path, api_key: str) -> None:
    async with asgi_openai(openai_app(seeded_data_dir), api_key) as api:
        response = await api.http.post(
            "/v1/chat/completions", json={**BODY, "stream": True}, headers=auth_of(api_key)
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    lines = data_lines(response.text)
    assert lines[-1] == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate(json.loads(x), strict=True) for x in lines[:-1]]
    assert [c.object for c in chunks] == ["chat.completion.chunk"] * len(chunks)
    assert "usage" not in json.loads(lines[0])  # without include_usage, as OpenAI sends it
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].choices[0].delta.content is None


async def test_max_tokens_caps_the_answer(seeded_data_dir: Path, api_key: str) -> None:
    async with asgi_openai(openai_app(seeded_data_dir), api_key) as api:
        completion = await api.client.chat.completions.create(
            model="ragtime", messages=CONVERSATION, max_tokens=2
        )
        capped = await api.client.chat.completions.create(
            model="ragtime", messages=CONVERSATION, max_completion_tokens=1, max_tokens=5
        )
    assert completion.choices[0].message.content == "The answer is in"
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None and completion.usage.completion_tokens == 2
    assert capped.choices[0].message.content == "The answer"  # the smaller cap wins
    degradations = (completion.model_extra or {})["degradations"]
    assert "output_capped" not in {d["action"] for d in degradations}


async def test_the_budget_comes_from_the_header_or_the_extension_field(
    seeded_data_dir: Path, api_key: str
) -> None:
    async with asgi_openai(openai_app(seeded_data_dir), api_key) as api:
        by_header = await api.client.chat.completions.create(
            model="ragtime", messages=CONVERSATION, extra_headers={"Request-Timeout-Ms": "7000"}
        )
        by_body = await api.client.chat.completions.create(
            model="ragtime",
            messages=CONVERSATION,
            extra_body={"budget_ms": 9000, "top_k": 2, "collection": "demo"},
        )
    assert (by_header.model_extra or {})["budget"]["budget_ms"] == 7000
    assert (by_body.model_extra or {})["budget"]["budget_ms"] == 9000
    assert len((by_body.model_extra or {})["citations"]) <= 2


async def test_an_unknown_model_is_404_model_not_found(seeded_data_dir: Path, api_key: str) -> None:
    async with asgi_openai(openai_app(seeded_data_dir), api_key) as api:
        with pytest.raises(openai.NotFoundError) as raised:
            await api.client.chat.completions.create(model="gpt-4o", messages=CONVERSATION)
    error = error_of(raised.value)
    assert raised.value.status_code == 404
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert error["type"] == "invalid_request_error" and "gpt-4o" in error["message"]


async def test_no_user_message_is_400(seeded_data_dir: Path, api_key: str) -> None:
    async with asgi_openai(openai_app(seeded_data_dir), api_key) as api:
        with pytest.raises(openai.BadRequestError) as raised:
            await api.client.chat.completions.create(
                model="ragtime", messages=[{"role": "system", "content": "Be brief."}]
            )
        with pytest.raises(openai.BadRequestError) as empty:
            await api.client.chat.completions.create(
                model="ragtime", messages=[{"role": "user", "content": "  "}]
            )
    error = error_of(raised.value)
    assert error["param"] == "messages" and error["type"] == "invalid_request_error"
    assert "user message" in error["message"]
    assert error_of(empty.value)["param"] == "messages"


async def test_an_invalid_body_is_400_naming_the_parameter(
    seeded_data_dir: Path, api_key: str
) -> None:
    async with asgi_openai(openai_app(seeded_data_dir), api_key) as api:
        with pytest.raises(openai.BadRequestError) as hot:
            await api.client.chat.completions.create(
                model="ragtime", messages=CONVERSATION, temperature=7
            )
        with pytest.raises(openai.BadRequestError) as many:
            await api.client.chat.completions.create(model="ragtime", messages=CONVERSATION, n=2)
        with pytest.raises(openai.NotFoundError) as nowhere:
            await api.client.chat.completions.create(
                model="ragtime", messages=CONVERSATION, extra_body={"collection": "nowhere"}
            )
    assert error_of(hot.value)["param"] == "temperature"
    assert error_of(many.value)["param"] == "n"
    assert error_of(nowhere.value)["code"] == "not_found"


async def test_a_bad_key_is_401_in_openais_shape(seeded_data_dir: Path, api_key: str) -> None:
    async with asgi_openai(openai_app(seeded_data_dir), "not-a-key") as api:
        with pytest.raises(openai.AuthenticationError) as raised:
            await api.client.chat.completions.create(model="ragtime", messages=CONVERSATION)
        with pytest.raises(openai.AuthenticationError) as listing:
            await api.client.models.list()
    error = error_of(raised.value)
    assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
    assert error["param"] is None
    assert raised.value.response.headers["WWW-Authenticate"] == "Bearer"
    assert error_of(listing.value)["code"] == "invalid_api_key"


async def test_a_failure_before_the_first_token_is_an_http_error(
    seeded_data_dir: Path, api_key: str
) -> None:
    async with asgi_openai(openai_app(seeded_data_dir, unavailable_backend()), api_key) as api:
        with pytest.raises(openai.InternalServerError) as raised:
            await api.client.chat.completions.create(
                model="ragtime", messages=CONVERSATION, stream=True
            )
    assert raised.value.status_code == 503
    assert raised.value.response.headers["Retry-After"]
    error = error_of(raised.value)
    assert error["code"] == "backend_unavailable" and error["type"] == "server_error"


async def test_a_failure_after_the_first_token_ends_with_an_error_chunk(
    seeded_data_dir: Path, api_key: str
) -> None:
    app = openai_app(seeded_data_dir, failing_midstream_backend())
    async with asgi_openai(app, api_key) as api:
        stream = await api.client.chat.completions.create(
            model="ragtime", messages=CONVERSATION, stream=True
        )
        text: list[str] = []
        with pytest.raises(openai.APIError) as raised:
            async for chunk in stream:
                text.append(chunk.choices[0].delta.content or "")
        response = await api.http.post(
            "/v1/chat/completions", json={**BODY, "stream": True}, headers=auth_of(api_key)
        )
    assert "".join(text) == "A partial answer "
    assert "decoder crashed" in raised.value.message
    assert raised.value.code == "generation_failed"
    last = json.loads(data_lines(response.text)[-1])
    assert set(last["error"]) == {"message", "type", "param", "code"}


def test_a_client_that_goes_away_stops_generation(seeded_data_dir: Path, api_key: str) -> None:
    """Through uvicorn: the sync client closes its stream after the first words."""
    backend = ScriptedBackend([f"word{i} " for i in range(200)], delay_s=0.02)
    app = build_app(seeded_data_dir, backend=backend, max_output_tokens=200)
    with served(app) as url:
        client = openai.OpenAI(api_key=api_key, base_url=f"{url}/v1", max_retries=0)
        with client.chat.completions.create(
            model="ragtime", messages=CONVERSATION, stream=True
        ) as stream:
            for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    break
        deadline = time.monotonic() + 5
        while backend.closed_streams == 0:
            assert time.monotonic() < deadline, "the backend kept streaming after the disconnect"
            time.sleep(0.02)
        produced = backend.yielded
        time.sleep(0.2)
    assert backend.yielded == produced < 50
