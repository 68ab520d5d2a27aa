"""Generation backends for tests only: scripted text, failures on cue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Sequence

from inference import (
    AssembledPrompt,
    BackendUnavailable,
    GenerationBackend,
    GenerationDone,
    GenerationEvent,
    GenerationFailed,
    TextDelta,
    Usage,
)
from inference.null_backend import NullTokenizer


class ScriptedBackend(GenerationBackend):
    """Streams ``deltas``; raises ``fail_with`` after ``fail_after`` deltas when given."""

    name = "scripted"
    model = "scripted-test-model"

    def __init__(
        self,
        deltas: Sequence[str] = ("The answer", " is in", " [1]."),
        *,
        fail_after: int | None = None,
        fail_with: Exception | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.deltas = list(deltas)
        self.fail_after = fail_after
        self.fail_with = fail_with or RuntimeError("scripted failure")
        self.delay_s = delay_s
        self.started_streams = 0
        self.closed_streams = 0
        self.yielded = 0
        self._tokenizer = NullTokenizer()

    @property
    def tokenizer(self) -> NullTokenizer:
        return self._tokenizer

    @property
    def loaded(self) -> bool:
        return True

    async def stream(
        self,
        prompt: AssembledPrompt,
        *,
        max_tokens: int,
        temperature: float = 0.0,
        deadline: float | None = None,
    ) -> AsyncGenerator[GenerationEvent, None]:
        self.started_streams += 1
        try:
            for i, delta in enumerate(self.deltas[:max_tokens]):
                if self.fail_after is not None and i >= self.fail_after:
                    raise self.fail_with
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                yield TextDelta(delta)
                self.yielded += 1
            if self.fail_after is not None and self.fail_after >= len(self.deltas):
                raise self.fail_with
            usage = Usage(prompt.prompt_tokens, 0, min(len(self.deltas), max_tokens))
            reason = "length" if len(self.deltas) > max_tokens else "stop"
            yield GenerationDone(usage=usage, finish_reason=reason, queue_ms=0.0)
        finally:
            self.closed_streams += 1


def unavailable_backend() -> ScriptedBackend:
    """A backend that fails before its first token, as a dead server would."""
    return ScriptedBackend(fail_after=0, fail_with=BackendUnavailable("backend is down"))


def failing_midstream_backend() -> ScriptedBackend:
    return ScriptedBackend(
        ("A partial answer ", "that breaks"),
        fail_after=1,
        fail_with=GenerationFailed("decoder crashed"),
    )
