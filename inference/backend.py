"""The generation backend contract: one small base class every backend implements.

In the spirit of httpx's ``BaseTransport``: a backend is built cheaply, loads in ``start()``,
releases in ``close()``, and answers one call, ``stream()``. In-process (llama.cpp) and remote
(SGLang over HTTP) backends plug in the same way; tests plug in a scripted one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from dataclasses import dataclass

from inference.prompt import AssembledPrompt
from inference.tokenizer import PromptTokenizer


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    cached_tokens: int
    """Prompt tokens whose KV cache was reused from an earlier request (prefix caching)."""
    completion_tokens: int


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class GenerationDone:
    usage: Usage
    finish_reason: str
    """``"stop"`` (end of turn), ``"length"`` (``max_tokens`` hit) or ``"cancelled"``."""
    queue_ms: float
    """Time spent waiting for the backend before decoding began."""


GenerationEvent = TextDelta | GenerationDone


class GenerationBackend(ABC):
    """Streams a completion of an assembled prompt.

    Contract of ``stream()``, an async generator:

    * it yields zero or more ``TextDelta`` and then exactly one ``GenerationDone``;
    * it raises ``BackendUnavailable`` before the first delta and ``GenerationFailed`` after;
    * if the consumer stops early (``aclose()`` on the generator, or its task is cancelled),
      the backend stops producing within a couple of tokens and is free for the next request.
      The ``GenerationDone`` of a cancelled request is not delivered.
    """

    name: str
    """The serving engine, for spans (``gen_ai.system``), e.g. ``"llama.cpp"``."""
    last_degradation: tuple[str, str] | None = None
    """``(action, reason)`` when the last ``stream()`` call chose to serve with less (a smaller
    model, to fit the budget); set synchronously by ``stream()``, read by the caller at once."""
    model: str
    """The model served, for spans (``gen_ai.request.model``)."""

    @property
    @abstractmethod
    def tokenizer(self) -> PromptTokenizer:
        """The model's tokenizer; available once ``start()`` has succeeded."""

    @property
    def loaded(self) -> bool:
        """Whether ``stream()`` can serve now."""
        return True

    @property
    def pending(self) -> int:
        """Requests this backend is decoding or holding in its queue (0 when it cannot tell)."""
        return 0

    async def start(self) -> None:  # noqa: B027 - an optional hook, like BaseTransport.close
        """Load the model or connect; heavy work belongs here, not in ``__init__``."""

    async def close(self) -> None:  # noqa: B027
        """Release the model, threads or connections."""

    @abstractmethod
    def stream(
        self, prompt: AssembledPrompt, *, max_tokens: int, temperature: float = 0.0
    ) -> AsyncGenerator[GenerationEvent, None]:
        """Generate at most ``max_tokens`` tokens after ``prompt.token_ids``."""
