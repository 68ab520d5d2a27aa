"""The OpenAI-compatible backend against a fake ``/v1/completions`` server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from bench.sglang_sim.model import detokenize, output_ids, text_ids
from inference import (
    AssembledPrompt,
    BackendUnavailable,
    GenerationDone,
    GenerationFailed,
    GenerationRejected,
    HFTokenizer,
    OpenAICompatBackend,
    PromptAssembler,
    RemoteOptions,
    RouteDecision,
    TextDelta,
)
from tests.fakes._serve import ServerThread, refused_url
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.passages import Doc

KEY = "sk-test-123"
NO_POLL = RemoteOptions(poll_interval_s=None)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    with ServerThread(fake.app) as running:
        yield fake, running.url + "/v1"


@pytest.fixture
def fake(server: tuple[FakeOpenAI, str]) -> FakeOpenAI:
    server[0].reset(api_key=KEY)
    return server[0]


@pytest.fixture
async def backend(
    server: tuple[FakeOpenAI, str], fake: FakeOpenAI, tokenizer: HFTokenizer
) -> AsyncIterator[OpenAICompatBackend]:
    b = OpenAICompatBackend(
        [server[1]], model="fake/tiny-chat", tokenizer=tokenizer, api_key=KEY,
        options=NO_POLL,
    )  # fmt: skip
    await b.start()
    yield b
    await b.close()


def prompt_for(tokenizer: HFTokenizer, question: str = "What is a list?") -> AssembledPrompt:
    return PromptAssembler(tokenizer).assemble(question, [Doc("Lists are mutable.")])


async def collect(
    backend: OpenAICompatBackend, prompt: AssembledPrompt, max_tokens: int = 64
) -> tuple[str, GenerationDone]:
    events = [e async for e in backend.stream(prompt, max_tokens=max_tokens)]
    assert isinstance(events[0], RouteDecision)
    *deltas, done = [e for e in events if not isinstance(e, RouteDecision)]
    assert isinstance(done, GenerationDone) and all(isinstance(d, TextDelta) for d in deltas)
    return "".join(d.text for d in deltas if isinstance(d, TextDelta)), done


async def test_streams_text_and_reads_the_usage_chunk(
    backend: OpenAICompatBackend, fake: FakeOpenAI, tokenizer: HFTokenizer
) -> None:
    assert backend.loaded
    prompt = prompt_for(tokenizer)
    text, done = await collect(backend, prompt)
    ids = text_ids(prompt.text)
    assert text == detokenize(output_ids(ids, 12), final=True)
    assert done.finish_reason == "stop"
    assert (done.usage.prompt_tokens, done.usage.completion_tokens) == (len(ids), 12)
    assert done.usage.cached_tokens == 0
    (request,) = fake.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert len(request.headers["x-request-id"]) == 32
    assert request.body["prompt"] == prompt.text
    assert request.body["stream_options"] == {"include_usage": True}
    _, again = await collect(backend, prompt, max_tokens=4)
    assert again.finish_reason == "length"
    assert again.usage.cached_tokens == len(ids) - 1


async def test_token_ids_can_be_sent_instead_of_text(
    server: tuple[FakeOpenAI, str], fake: FakeOpenAI, tokenizer: HFTokenizer
) -> None:
    backend = OpenAICompatBackend(
        [server[1]], model="m", tokenizer=tokenizer, api_key=KEY, send_token_ids=True,
        options=NO_POLL,
    )  # fmt: skip
    await backend.start()
    prompt = prompt_for(tokenizer)
    text, _ = await collect(backend, prompt)
    assert fake.requests[0].body["prompt"] == prompt.token_ids
    assert text == detokenize(output_ids(prompt.token_ids, 12), final=True)
    await backend.close()


async def test_503_and_refused_endpoints_are_retried_then_unavailable(
    server: tuple[FakeOpenAI, str], fake: FakeOpenAI, tokenizer: HFTokenizer
) -> None:
    dead, sock = refused_url()
    with sock:
        backend = OpenAICompatBackend(
            [dead + "/v1", server[1]], model="m", tokenizer=tokenizer, api_key=KEY,
            options=NO_POLL,
        )  # fmt: skip
        await backend.start()
        _, done = await collect(backend, prompt_for(tokenizer))
        assert done.finish_reason == "stop"
        fake.reset(api_key=KEY, reject_status=503)
        with pytest.raises(BackendUnavailable, match="HTTP 503"):
            await collect(backend, prompt_for(tokenizer))
        await backend.close()


async def test_a_wrong_key_is_not_retried(
    server: tuple[FakeOpenAI, str], fake: FakeOpenAI, tokenizer: HFTokenizer
) -> None:
    backend = OpenAICompatBackend(
        [server[1]], model="m", tokenizer=tokenizer, api_key="wrong", options=NO_POLL
    )
    await backend.start()
    assert not backend.loaded
    with pytest.raises(BackendUnavailable, match="HTTP 401"):
        await collect(backend, prompt_for(tokenizer))
    assert len(fake.requests) == 1
    await backend.close()


async def test_an_error_event_mid_stream_is_generation_failed(
    backend: OpenAICompatBackend, fake: FakeOpenAI, tokenizer: HFTokenizer
) -> None:
    fake.reset(api_key=KEY, error_after=3)
    with pytest.raises(GenerationFailed, match="engine died"):
        await collect(backend, prompt_for(tokenizer))


async def test_closing_the_stream_stops_decoding(
    backend: OpenAICompatBackend, fake: FakeOpenAI, tokenizer: HFTokenizer
) -> None:
    fake.reset(api_key=KEY, itl_s=0.02, natural_tokens=500)
    events = backend.stream(prompt_for(tokenizer), max_tokens=500)
    assert isinstance(await anext(events), RouteDecision)
    assert isinstance(await anext(events), TextDelta)
    await events.aclose()
    await asyncio.sleep(0.2)
    (decoded,) = fake.decoded.values()
    assert decoded < 30
    await asyncio.sleep(0.1)
    assert list(fake.decoded.values()) == [decoded]  # it stopped when the stream closed


async def test_vllms_request_errors_are_rejected_not_retried(
    server: tuple[FakeOpenAI, str], fake: FakeOpenAI, tokenizer: HFTokenizer
) -> None:
    backend = OpenAICompatBackend(
        [server[1]], model="m", tokenizer=tokenizer, api_key=KEY, options=NO_POLL
    )
    await backend.start()
    assert backend.context_length == 8192  # max_model_len from /v1/models
    prompt = prompt_for(tokenizer)
    fake.config.max_model_len = 20  # smaller than the client read: vLLM answers 400
    with pytest.raises(GenerationRejected, match="maximum context length"):
        await collect(backend, prompt)
    fake.config.max_model_len = 8192
    fake.config.error_code, fake.config.error_after = 400, 0  # an error event with a 4xx code
    with pytest.raises(GenerationRejected, match="engine died"):
        await collect(backend, prompt)
    assert len(fake.requests) == 2 and backend.states[server[1]].up
    await backend.close()


def test_backend_needs_an_endpoint(tokenizer: HFTokenizer) -> None:
    with pytest.raises(ValueError, match="endpoint"):
        OpenAICompatBackend([], model="m", tokenizer=tokenizer)
