"""One endpoint of an ``HTTPStreamBackend``, as a backend of its own: what the router sends a
request to, and what the budget engine calibrates."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Protocol

from inference.backend import (
    SERVER_PENALTIES,
    GenerationBackend,
    GenerationEvent,
    Penalties,
    TargetLoad,
    Urgency,
)
from inference.prompt import AssembledPrompt
from inference.remote.endpoints import EndpointState
from inference.tokenizer import PromptTokenizer


class EndpointPool(Protocol):
    """What a view needs of the backend whose endpoint it is (``HTTPStreamBackend`` fits)."""

    name: str
    model: str

    @property
    def tokenizer(self) -> PromptTokenizer: ...

    @property
    def loaded(self) -> bool: ...

    @property
    def states(self) -> dict[str, EndpointState]: ...

    def open_stream(
        self,
        prompt: AssembledPrompt,
        max_tokens: int,
        temperature: float,
        only: str | None,
        urgency: Urgency | None = None,
        penalties: Penalties = SERVER_PENALTIES,
    ) -> AsyncGenerator[GenerationEvent, None]: ...


class EndpointBackend(GenerationBackend):
    """One endpoint of an ``HTTPStreamBackend``: its client, options and state, no retries.

    Built by ``HTTPStreamBackend.endpoint()``; starting and closing belong to the parent."""

    def __init__(self, parent: EndpointPool, url: str) -> None:
        self._parent = parent
        self.url = url
        self.name = parent.name
        self.model = parent.model

    @property
    def state(self) -> EndpointState:
        return self._parent.states[self.url]

    @property
    def tokenizer(self) -> PromptTokenizer:
        return self._parent.tokenizer

    @property
    def loaded(self) -> bool:
        return self._parent.loaded and self.state.serving

    @property
    def pending(self) -> int:
        return self.state.in_flight

    @property
    def context_length(self) -> int | None:
        return self.state.context_length

    def cost_target(self, question: str = "") -> str:
        return self.url

    def probe_backends(self) -> Mapping[str, GenerationBackend]:
        return {self.url: self} if self.state.up else {}

    def target_load(self, target: str) -> TargetLoad | None:
        return self.state.load if target.rstrip("/") == self.url else None

    def _generate(
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
        return self._parent.open_stream(
            prompt, max_tokens, temperature, self.url, urgency, penalties
        )
