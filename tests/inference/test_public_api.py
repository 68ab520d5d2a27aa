"""The names ``inference`` exports, the error statuses, and the backend base's defaults."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import pytest

import inference
from inference import (
    AssembledPrompt,
    BackendUnavailable,
    GenerationBackend,
    GenerationDone,
    GenerationEvent,
    GenerationFailed,
    InferenceError,
    Penalties,
    PromptTokenizer,
    TextDelta,
    Urgency,
    Usage,
)
from inference.backend import SERVER_PENALTIES
from tests.fakes.word_tokenizer import WordTokenizer


def test_exported_names() -> None:
    assert sorted(inference.__all__) == sorted(
        [
            "DEFAULT_SYSTEM_PROMPT",
            "AssembledPrompt",
            "BackendBusy",
            "BackendUnavailable",
            "ContextPassage",
            "GatewayClasses",
            "GenerationBackend",
            "GenerationDone",
            "GenerationEvent",
            "GenerationFailed",
            "GenerationRejected",
            "HFTokenizer",
            "InferenceError",
            "LlamaCppBackend",
            "LlamaCppTokenizer",
            "NullBackend",
            "OpenAICompatBackend",
            "Penalties",
            "PromptAssembler",
            "common_prefix",
            "PromptPassage",
            "PromptTokenizer",
            "QuestionClassifier",
            "RemoteOptions",
            "RouteDecision",
            "RoutedBackend",
            "SGLangBackend",
            "TargetLoad",
            "TextDelta",
            "Urgency",
            "Usage",
            "default_generation_model_path",
        ]
    )
    for name in inference.__all__:
        assert getattr(inference, name) is not None


def test_error_statuses() -> None:
    assert InferenceError.status_code == 500
    assert BackendUnavailable.status_code == 503 and issubclass(BackendUnavailable, InferenceError)
    assert GenerationFailed.status_code == 502 and issubclass(GenerationFailed, InferenceError)
    assert issubclass(inference.BackendBusy, BackendUnavailable)
    rejected = inference.GenerationRejected("bad", status_code=422)
    assert rejected.status_code == 422 and not isinstance(rejected, BackendUnavailable)
    assert inference.GenerationRejected("bad", status_code=503).status_code == 400


def test_system_prompt_is_fixed() -> None:
    assert inference.DEFAULT_SYSTEM_PROMPT == inference.prompt.DEFAULT_SYSTEM_PROMPT
    assert "[1]" in inference.DEFAULT_SYSTEM_PROMPT


class EchoBackend(GenerationBackend):
    """The smallest backend: echoes the prompt's token count."""

    name = "echo"
    model = "echo-1"

    @property
    def tokenizer(self) -> PromptTokenizer:
        return WordTokenizer()

    async def _generate(
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
        yield TextDelta(str(prompt.prompt_tokens))
        yield GenerationDone(Usage(prompt.prompt_tokens, 0, 1), "stop", 0.0)


async def test_a_backend_needs_only_a_tokenizer_and_its_events() -> None:
    backend = EchoBackend()
    await backend.start()
    assert backend.loaded and isinstance(backend.tokenizer, PromptTokenizer)
    prompt = inference.PromptAssembler(backend.tokenizer).assemble("q", [])
    events = [e async for e in backend.stream(prompt, max_tokens=4)]
    assert events[0] == TextDelta(str(prompt.prompt_tokens))
    assert isinstance(events[-1], GenerationDone)
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        backend.stream(prompt, max_tokens=0)  # the template checks it, at once
    await backend.close()
