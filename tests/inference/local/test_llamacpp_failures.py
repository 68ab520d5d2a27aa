"""Failure paths of the llama.cpp backend, with a stand-in for ``llama_cpp.Llama``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from inference import (
    AssembledPrompt,
    BackendUnavailable,
    GenerationDone,
    GenerationEvent,
    GenerationFailed,
    LlamaCppBackend,
    TextDelta,
)

EOS = 2


class FakeLlama:
    """Emits token ids 10, 11, ... as text "t10 t11 ..."; raises after ``fail_after`` tokens."""

    def __init__(self, fail_after: int | None) -> None:
        self.metadata: dict[str, str] = {}
        self.fail_after = fail_after
        self._input_ids = np.array([], dtype=np.intc)

    def n_ctx(self) -> int:
        return 64

    def set_seed(self, seed: int) -> None:
        pass

    def token_eos(self) -> int:
        return EOS

    def token_bos(self) -> int:
        return 1

    def detokenize(self, tokens: list[int], special: bool = False) -> bytes:
        return "".join(f" t{t}" for t in tokens).encode()

    def generate(self, tokens: list[int], **_: Any) -> Iterator[int]:
        for i in range(10, 30):
            if self.fail_after is not None and i - 10 >= self.fail_after:
                raise RuntimeError("decode failed")
            time.sleep(0.005)
            yield i

    def close(self) -> None:
        pass


async def started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_after: int | None
) -> LlamaCppBackend:
    def fake_load(self: LlamaCppBackend) -> FakeLlama:
        return FakeLlama(fail_after)

    monkeypatch.setattr(LlamaCppBackend, "_load", fake_load)
    model = tmp_path / "fake.gguf"
    model.write_bytes(b"")
    backend = LlamaCppBackend(model)
    await backend.start()
    return backend


PROMPT = AssembledPrompt("", [5, 6, 7], 3, [], 0, 0, 0)


async def test_failure_before_the_first_token_is_backend_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = await started(tmp_path, monkeypatch, fail_after=0)
    with pytest.raises(BackendUnavailable, match="decode failed") as info:
        async for _ in backend.stream(PROMPT, max_tokens=8):
            pass
    assert isinstance(info.value.__cause__, RuntimeError)
    await backend.close()


async def test_failure_mid_stream_is_generation_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = await started(tmp_path, monkeypatch, fail_after=2)
    seen: list[str] = []
    with pytest.raises(GenerationFailed, match="decode failed"):
        async for event in backend.stream(PROMPT, max_tokens=8):
            assert isinstance(event, TextDelta)
            seen.append(event.text)
    assert seen == [" t10", " t11"]
    await backend.close()


async def test_close_stops_the_running_request_and_fails_the_queued_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = await started(tmp_path, monkeypatch, fail_after=None)

    async def consume() -> list[GenerationEvent]:
        return [event async for event in backend.stream(PROMPT, max_tokens=20)]

    running = asyncio.create_task(consume())
    queued = asyncio.create_task(consume())
    await asyncio.sleep(0.02)
    await backend.close()
    events, failure = await asyncio.gather(running, queued, return_exceptions=True)
    assert isinstance(events, list) and isinstance(events[-1], GenerationDone)
    assert events[-1].finish_reason == "cancelled" and events[-1].usage.completion_tokens < 20
    assert isinstance(failure, BackendUnavailable) and "closed" in str(failure)
    assert not backend.loaded
    with pytest.raises(BackendUnavailable, match="not loaded"):
        await consume()


async def test_max_tokens_must_be_positive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = await started(tmp_path, monkeypatch, fail_after=None)
    with pytest.raises(ValueError):
        async for _ in backend.stream(PROMPT, max_tokens=0):
            pass
    await backend.close()
