"""Generation backends for tests only: scripted text, failures on cue."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Sequence

from inference import (
    AssembledPrompt,
    BackendUnavailable,
    GenerationBackend,
    GenerationDone,
    GenerationEvent,
    GenerationFailed,
    Penalties,
    RouteDecision,
    TargetLoad,
    TextDelta,
    Urgency,
    Usage,
)
from inference.backend import SERVER_PENALTIES
from inference.local.null_backend import NullTokenizer


class ScriptedBackend(GenerationBackend):
    """Streams ``deltas``; raises ``fail_with`` after ``fail_after`` deltas when given; yields
    ``route`` first when given, as a backend with several targets does."""

    name = "scripted"
    model = "scripted-test-model"

    def __init__(
        self,
        deltas: Sequence[str] = ("The answer", " is in", " [1]."),
        *,
        fail_after: int | None = None,
        fail_with: Exception | None = None,
        delay_s: float = 0.0,
        route: RouteDecision | None = None,
    ) -> None:
        self.deltas = list(deltas)
        self.route = route
        self.fail_after = fail_after
        self.fail_with = fail_with or RuntimeError("scripted failure")
        self.delay_s = delay_s
        self.started_streams = 0
        self.penalties: list[Penalties] = []
        """What each stream was asked to penalize."""
        self.closed_streams = 0
        self.yielded = 0
        self._tokenizer = NullTokenizer()

    @property
    def tokenizer(self) -> NullTokenizer:
        return self._tokenizer

    @property
    def loaded(self) -> bool:
        return True

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
        self.started_streams += 1
        self.penalties.append(penalties)
        try:
            if self.route is not None:
                yield self.route
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


class PromptEchoBackend(ScriptedBackend):
    """Answers with the user turn of its prompt, word by word, and keeps every prompt it was
    given: what reached the model, as a test sees it in the answer and in ``prompts``."""

    name = "prompt-echo"
    model = "prompt-echo-model"

    def __init__(self) -> None:
        super().__init__(())
        self.prompts: list[AssembledPrompt] = []

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
        self.prompts.append(prompt)
        user = prompt.text.split("<|user|>", 1)[-1]
        words = [w + " " for w in user.split()]
        for word in words:
            yield TextDelta(word)
        usage = Usage(prompt.prompt_tokens, 0, len(words))
        yield GenerationDone(usage=usage, finish_reason="stop", queue_ms=0.0)


def unavailable_backend() -> ScriptedBackend:
    """A backend that fails before its first token, as a dead server would."""
    return ScriptedBackend(fail_after=0, fail_with=BackendUnavailable("backend is down"))


def failing_midstream_backend() -> ScriptedBackend:
    return ScriptedBackend(
        ("A partial answer ", "that breaks"),
        fail_after=1,
        fail_with=GenerationFailed("decoder crashed"),
    )


class SimulatedBackend(GenerationBackend):
    """A model server in miniature, for budget tests: it takes time the way inference does.

    Time to first token is ``fixed_ms`` plus ``prefill_ms_per_token`` for each prompt token not
    shared with the previous prompt (a one-entry prefix cache, as llama.cpp keeps), then
    ``decode_ms_per_token`` per further token. ``slots`` requests run at once; the rest wait in
    arrival order, and their wait is reported as ``queue_ms``.
    """

    name = "simulated"
    model = "simulated-model"

    def __init__(
        self,
        *,
        fixed_ms: float = 20.0,
        prefill_ms_per_token: float = 1.0,
        decode_ms_per_token: float = 5.0,
        answer_words: int = 200,
        slots: int = 1,
    ) -> None:
        self.fixed_ms = fixed_ms
        self.prefill_ms_per_token = prefill_ms_per_token
        self.decode_ms_per_token = decode_ms_per_token
        self.answer_words = answer_words
        self.slots = slots
        self.running = 0
        self.waiting = 0
        self.most_waiting = 0
        """The most requests seen waiting for a slot at once."""
        self.served: list[Usage] = []
        self._previous: list[int] = []
        self._semaphore: asyncio.Semaphore | None = None
        self._tokenizer = NullTokenizer()

    @property
    def tokenizer(self) -> NullTokenizer:
        return self._tokenizer

    def target_load(self, target: str) -> TargetLoad:
        return TargetLoad(running=self.running, waiting=self.waiting, max_running=self.slots)

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
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(self.slots)
        arrived = time.perf_counter()
        self.waiting += 1
        self.most_waiting = max(self.most_waiting, self.waiting)
        try:
            await self._semaphore.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            queue_ms = (time.perf_counter() - arrived) * 1000.0
            ids = list(prompt.token_ids)
            shared = 0
            for a, b in zip(ids, self._previous, strict=False):
                if a != b:
                    break
                shared += 1
            cached = min(shared, max(len(ids) - 1, 0))
            self._previous = ids
            uncached = len(ids) - cached
            await asyncio.sleep((self.fixed_ms + self.prefill_ms_per_token * uncached) / 1000.0)
            count = min(self.answer_words, max_tokens)
            for i in range(count):
                if i:
                    await asyncio.sleep(self.decode_ms_per_token / 1000.0)
                yield TextDelta(f"word{i} ")
            usage = Usage(len(ids), cached, count)
            self.served.append(usage)
            reason = "length" if count == max_tokens else "stop"
            yield GenerationDone(usage=usage, finish_reason=reason, queue_ms=queue_ms)
        finally:
            self.running -= 1
            self._semaphore.release()
