"""How a generation ended (``Generated``): the generate stage's result, which the budget
session reads as a ``tracing.budget.GenerationResult``."""

from __future__ import annotations

from dataclasses import dataclass

from inference import Usage
from inference.repetition import StopReason


@dataclass(frozen=True)
class Generated:
    """How a generation ended: ``finish_reason`` is the backend's (``stop``, ``length``,
    ``cancelled``), or ``deadline`` when the deadline came first, or ``yielded`` when it
    stopped early so that a request queued behind it could have the time."""

    finish_reason: str
    target: str
    started: float
    first_at: float | None = None
    """``time.perf_counter()`` at the first text, None if none came."""
    usage: Usage | None = None
    queue_ms: float = 0.0
    last_at: float | None = None
    """``time.perf_counter()`` at the last text, for an answer cut short (else None)."""
    streamed_tokens: int = 0
    """For an answer cut short (no usage comes): its text's tokens, by the model's tokenizer."""
    prompt_tokens: int = 0
    """For an answer cut short: its prompt's tokens (what usage would have said)."""
    may_have_queued: bool = True
    """False when the target had a free slot and nobody waiting as the request was sent: its
    first token's time is the target's own, with no queue in it."""
    shared_prefix_tokens: int | None = None
    """The prompt's leading tokens every prompt shares, which the target keeps cached."""
    stopped_on: StopReason | None = None
    """Why the stage stopped an answer the backend was still writing (``repetition``: it
    repeated itself; ``turn``: it began a new turn); its finish reason is ``stop``, and no usage
    comes (its streamed and prompt tokens say what was generated)."""
