"""What the budget session reads of the generation backend: the targets it may send an answer
to, their reported load and context length, and a generation's result. Protocols, so that
``tracing`` needs nothing of ``inference``: its backends satisfy them as they are."""

from __future__ import annotations

from typing import Protocol


class ServingTargets(Protocol):
    """Where answers are generated, as the budget sees it (``inference.GenerationBackend``
    fits): the targets an answer may go to, their loads and context length."""

    @property
    def earliest_deadline_first(self) -> bool: ...

    @property
    def context_length(self) -> int | None: ...

    def cost_targets(self, question: str = "") -> list[str]: ...

    def target_load(self, target: str) -> ReportedLoad | None: ...


class ReportedLoad(Protocol):
    """What a serving target says of its load (``inference.TargetLoad`` fits)."""

    @property
    def waiting(self) -> int: ...

    @property
    def max_running(self) -> int | None: ...


class TokenUsage(Protocol):
    """A generation's token counts (``inference.Usage`` fits)."""

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def cached_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...


class GenerationResult(Protocol):
    """How one generation ended (``app.stages.Generated`` fits)."""

    @property
    def finish_reason(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def started(self) -> float: ...

    @property
    def first_at(self) -> float | None: ...

    @property
    def usage(self) -> TokenUsage | None: ...

    @property
    def queue_ms(self) -> float: ...
