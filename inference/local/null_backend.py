"""A generation backend that costs (almost) nothing: for benches and tests only.

``NullBackend`` streams ``tokens`` (by default ``max_tokens``) one-word deltas without decoding
anything, so a load run measures the service around the model (HTTP, auth, moderation,
retrieval, prompt assembly, streaming) apart from the model itself. Its tokenizer counts
whitespace-separated words and its chat template is a trivial ChatML-like one.

It is chosen only by setting (``RAGTIME_GENERATION_BACKEND=null``); never serve users with it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence

from inference.backend import (
    SERVER_PENALTIES,
    GenerationBackend,
    GenerationDone,
    GenerationEvent,
    Penalties,
    TargetLoad,
    TextDelta,
    Urgency,
    Usage,
)
from inference.prompt import AssembledPrompt

DELTA = "ok "
"""What every delta says: a whole word and its space, so an answer filter releases it at once."""
MAX_RUNNING = 4096
"""The slots it reports: nothing queues at a backend that does no work."""


class NullTokenizer:
    """One token per whitespace-separated word; ``<|role|>`` headers as the chat template."""

    def encode(self, text: str) -> list[int]:
        return [hash(word) % 50_000 for word in text.split()]

    def count(self, text: str) -> int:
        return len(text.split())

    def special_tokens(self) -> Sequence[str]:
        """None: ``encode`` splits on whitespace and knows no special tokens."""
        return ()

    def render_chat(self, messages: Sequence[Mapping[str, str]]) -> str:
        parts = [f"<|{m['role']}|>\n{m['content']}\n" for m in messages]
        return "".join(parts) + "<|assistant|>\n"


class NullBackend(GenerationBackend):
    """Streams ``tokens`` deltas (``max_tokens`` when ``None``) and finishes, doing no work."""

    name = "null"
    model = "null"
    generation_waits = False  # its tokens cost only our own streaming of them
    filler = True  # the same word over and over: no model repeating itself

    def __init__(self, *, tokens: int | None = None) -> None:
        if tokens is not None and tokens < 1:
            raise ValueError(f"tokens must be >= 1, got {tokens}")
        self.tokens = tokens
        self._tokenizer = NullTokenizer()

    @property
    def tokenizer(self) -> NullTokenizer:
        return self._tokenizer

    def probe_backends(self) -> Mapping[str, GenerationBackend]:
        """Itself: its costs are nothing like a model's, so the budget engine measures them
        (the calibration probe) instead of planning with the CPU model's prior."""
        return {self.cost_target(): self}

    def target_load(self, target: str) -> TargetLoad | None:
        """It decodes any number of answers at once (it does no work): many slots, none busy."""
        return TargetLoad(max_running=MAX_RUNNING)

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
        count = max_tokens if self.tokens is None else min(self.tokens, max_tokens)
        for _ in range(count):
            yield TextDelta(DELTA)
        reason = "length" if count == max_tokens else "stop"
        usage = Usage(prompt_tokens=prompt.prompt_tokens, cached_tokens=0, completion_tokens=count)
        yield GenerationDone(usage=usage, finish_reason=reason, queue_ms=0.0)
