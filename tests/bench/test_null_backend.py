"""The model-free backend the benches use, and the setting that chooses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.pipeline.services import default_backend
from app.settings import Settings
from inference import (
    GenerationDone,
    LlamaCppBackend,
    NullBackend,
    PromptAssembler,
    PromptTokenizer,
    TextDelta,
)


async def test_streams_max_tokens_deltas_then_done() -> None:
    backend = NullBackend()
    await backend.start()
    assert backend.loaded and isinstance(backend.tokenizer, PromptTokenizer)
    prompt = PromptAssembler(backend.tokenizer).assemble("what is a list?", [])
    events = [e async for e in backend.stream(prompt, max_tokens=5)]
    assert events[:-1] == [TextDelta("ok ")] * 5
    done = events[-1]
    assert isinstance(done, GenerationDone) and done.finish_reason == "length"
    assert done.usage.completion_tokens == 5 and done.usage.prompt_tokens == prompt.prompt_tokens
    await backend.close()


async def test_a_configured_count_below_max_tokens_stops() -> None:
    backend = NullBackend(tokens=2)
    prompt = PromptAssembler(backend.tokenizer).assemble("q", [])
    events = [e async for e in backend.stream(prompt, max_tokens=8)]
    assert len(events) == 3 and isinstance(events[-1], GenerationDone)
    assert events[-1].finish_reason == "stop"


def test_bad_counts() -> None:
    with pytest.raises(ValueError):
        NullBackend(tokens=0)


def test_the_setting_chooses_the_backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAGTIME_GENERATION_BACKEND", "null")
    assert isinstance(default_backend(Settings(_env_file=None, data_dir=tmp_path)), NullBackend)
    monkeypatch.delenv("RAGTIME_GENERATION_BACKEND")
    settings = Settings(_env_file=None, data_dir=tmp_path)
    assert settings.generation_backend == "llama.cpp"
    assert isinstance(default_backend(settings), LlamaCppBackend)
    with pytest.raises(ValueError):
        Settings(_env_file=None, generation_backend="gpt")
