"""The llama.cpp backend with the real SmolLM2 model: a request's repetition penalties reach
``Llama.generate``, unset ones as the backend's own, and change what greedy decoding writes."""

from __future__ import annotations

from typing import Any

import pytest

from inference import (
    AssembledPrompt,
    LlamaCppBackend,
    Penalties,
    PromptAssembler,
    TextDelta,
)
from inference.backend import SERVER_PENALTIES
from inference.local.llamacpp import DEFAULT_REPEAT_PENALTY
from tests.fakes.passages import Doc

pytestmark = pytest.mark.slow

#: A question SmolLM2 answers with code, whose words it comes back to.
QUESTION = "How do I give a parameter of a function a default value?"


def prompt_for(backend: LlamaCppBackend) -> AssembledPrompt:
    docs = [Doc("A list is written with square brackets: [1, 2, 3]. list() makes one too.")]
    return PromptAssembler(backend.tokenizer).assemble(QUESTION, docs)


async def text_of(
    backend: LlamaCppBackend, penalties: Penalties = SERVER_PENALTIES, max_tokens: int = 64
) -> str:
    prompt = prompt_for(backend)
    events = [e async for e in backend.stream(prompt, max_tokens=max_tokens, penalties=penalties)]
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_each_penalty_reaches_generate_and_unset_ones_are_the_backends_own(
    llama_backend: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = llama_backend._llm
    calls: list[dict[str, Any]] = []
    generate = llm.generate

    def spy(tokens: list[int], **kwargs: Any) -> Any:
        calls.append(kwargs)
        return generate(tokens, **kwargs)

    monkeypatch.setattr(llm, "generate", spy)
    await text_of(llama_backend, max_tokens=2)
    await text_of(llama_backend, Penalties(repeat=1.3, frequency=0.2, presence=0.1), 2)
    await text_of(llama_backend, Penalties(frequency=0.4), 2)
    said = [(c["repeat_penalty"], c["frequency_penalty"], c["presence_penalty"]) for c in calls]
    assert said == [
        (DEFAULT_REPEAT_PENALTY, 0.0, 0.0),
        (1.3, 0.2, 0.1),
        (DEFAULT_REPEAT_PENALTY, 0.4, 0.0),
    ]
    assert llama_backend.repeat_penalty == DEFAULT_REPEAT_PENALTY


async def test_a_penalty_changes_what_greedy_decoding_writes(
    llama_backend: LlamaCppBackend,
) -> None:
    """At temperature 0 the same request writes the same text; a penalty, another one."""
    none = Penalties(repeat=1.0)
    plain = await text_of(llama_backend, none)
    assert await text_of(llama_backend, none) == plain
    assert await text_of(llama_backend, Penalties(repeat=1.5)) != plain
    assert await text_of(llama_backend, Penalties(repeat=1.0, frequency=1.0)) != plain
