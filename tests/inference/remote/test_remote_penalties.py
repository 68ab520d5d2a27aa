"""Repetition penalties reach remote servers under their APIs' names, and only those set: the
simulated SGLang server (bench/sglang_sim, which refuses a ``sampling_params`` key SGLang
0.5.23 does not know) directly and behind the router, and the fake OpenAI server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from bench.sglang_sim.contract import contract_error
from bench.sglang_sim.server import SimulatedSGLang
from inference import (
    AssembledPrompt,
    GenerationDone,
    GenerationEvent,
    HFTokenizer,
    OpenAICompatBackend,
    Penalties,
    PromptAssembler,
    QuestionClassifier,
    RemoteOptions,
    RoutedBackend,
    SGLangBackend,
)
from inference.backend import GenerationBackend
from tests.fakes._serve import ServerThread
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.passages import Doc

OPTIONS = RemoteOptions(poll_interval_s=None, stall_timeout_s=5.0)
ALL_THREE = Penalties(repeat=1.2, frequency=0.3, presence=0.1)


@pytest.fixture(scope="module")
def sglang() -> Iterator[tuple[SimulatedSGLang, str]]:
    server = SimulatedSGLang()
    with ServerThread(server.app) as running:
        yield server, running.url


@pytest.fixture(scope="module")
def openai() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI()
    with ServerThread(fake.app) as running:
        yield fake, running.url + "/v1"


@pytest.fixture
async def sglang_backend(
    sglang: tuple[SimulatedSGLang, str], tokenizer: HFTokenizer
) -> AsyncIterator[SGLangBackend]:
    sglang[0].reset()
    backend = SGLangBackend(
        [sglang[1]], model="fake/tiny-chat", tokenizer=tokenizer, options=OPTIONS
    )
    await backend.start()
    yield backend
    await backend.close()


def prompt_for(tokenizer: HFTokenizer) -> AssembledPrompt:
    return PromptAssembler(tokenizer, context_tokens=200).assemble(
        "What is a list?", [Doc("Lists are mutable sequences.")]
    )


async def finish(backend: GenerationBackend, prompt: AssembledPrompt, **kwargs: Any) -> str:
    events: list[GenerationEvent] = [
        e async for e in backend.stream(prompt, max_tokens=4, **kwargs)
    ]
    done = events[-1]
    assert isinstance(done, GenerationDone)
    return done.finish_reason


def sampling_sent(server: SimulatedSGLang) -> dict[str, Any]:
    params: dict[str, Any] = server.generate_requests[-1].body["sampling_params"]
    return params


async def test_sglang_gets_each_penalty_set_under_its_own_name(
    sglang_backend: SGLangBackend, sglang: tuple[SimulatedSGLang, str], tokenizer: HFTokenizer
) -> None:
    prompt = prompt_for(tokenizer)
    assert await finish(sglang_backend, prompt, penalties=ALL_THREE) == "length"
    assert sampling_sent(sglang[0]) == {
        "max_new_tokens": 4,
        "temperature": 0.0,
        "repetition_penalty": 1.2,
        "frequency_penalty": 0.3,
        "presence_penalty": 0.1,
    }
    await finish(sglang_backend, prompt, penalties=Penalties(repeat=1.1))
    assert sampling_sent(sglang[0]) == {
        "max_new_tokens": 4,
        "temperature": 0.0,
        "repetition_penalty": 1.1,
    }


async def test_sglang_is_sent_no_penalty_unless_set(
    sglang_backend: SGLangBackend, sglang: tuple[SimulatedSGLang, str], tokenizer: HFTokenizer
) -> None:
    await finish(sglang_backend, prompt_for(tokenizer))
    assert sampling_sent(sglang[0]) == {"max_new_tokens": 4, "temperature": 0.0}


def test_the_simulated_sglang_knows_these_names_and_not_others() -> None:
    """The stand-in checks the keys as SGLang does: what the tests above send is what SGLang
    takes, and a misspelt penalty would be refused (an HTTP 400 before streaming)."""
    body: dict[str, Any] = {"input_ids": [1, 2], "stream": True}
    sent = {"repetition_penalty": 1.2, "frequency_penalty": 0.3, "presence_penalty": 0.1}
    assert contract_error(body | {"sampling_params": sent}) is None
    wrong = contract_error(body | {"sampling_params": {"repeat_penalty": 1.2}})
    assert wrong is not None and "repeat_penalty" in wrong


async def test_the_router_passes_the_penalties_to_the_pool_it_picks(
    sglang: tuple[SimulatedSGLang, str], tokenizer: HFTokenizer
) -> None:
    sglang[0].reset()
    router = RoutedBackend.sglang(
        {"small": {"model": "fake/small", "endpoints": [sglang[1]]}},
        tokenizer=tokenizer,
        classifier=QuestionClassifier.from_config({"rules": [], "long_pool": "small"}),
        options=OPTIONS,
    )
    await router.start()
    try:
        await finish(router, prompt_for(tokenizer), penalties=Penalties(presence=0.5))
    finally:
        await router.close()
    assert sampling_sent(sglang[0])["presence_penalty"] == 0.5
    assert "repetition_penalty" not in sampling_sent(sglang[0])


async def test_openai_gets_frequency_and_presence_and_never_a_repetition_penalty(
    openai: tuple[FakeOpenAI, str], tokenizer: HFTokenizer
) -> None:
    fake, url = openai
    fake.reset()
    backend = OpenAICompatBackend(
        [url], model="fake/tiny-chat", tokenizer=tokenizer, options=OPTIONS
    )
    await backend.start()
    try:
        prompt = prompt_for(tokenizer)
        await finish(backend, prompt, penalties=ALL_THREE)
        await finish(backend, prompt)
    finally:
        await backend.close()
    with_penalties, without = (r.body for r in fake.requests if r.path == "/v1/completions")
    assert with_penalties["frequency_penalty"] == 0.3
    assert with_penalties["presence_penalty"] == 0.1
    assert "repetition_penalty" not in with_penalties and "repeat_penalty" not in with_penalties
    assert not {"frequency_penalty", "presence_penalty"} & set(without)
