"""What a stage is to the budget, and what the budget gives it: the seam's two shapes.

A stage is a component with a ``name`` and an async ``run(inputs, allowance)`` (Haystack 2.x's
shape, with the budget's allowance beside the inputs). The pipeline hands it to its request's
``BudgetSession.run(stage, inputs)``, which opens the stage's span, gives it its ``Allowance``
(until when it may run, the plan once made, how deep a search looks, whether an optional
stage fits what is left), records its result, and learns its cost. Generation streams:
``BudgetSession.generate(stage, inputs)`` gives it a ``GenerationAllowance`` instead.

What the session reads of a result (``StageOutcome``; each optional but ``record``):

* ``record(span)``: the result's attributes on the stage's span;
* ``units``: what its cost is learned over (candidate pairs scored; 0: nothing learned, and no
  prediction is compared, as for a rerank with no candidates); 1 when absent;
* ``degradation``: ``(action, reason)`` when the stage gave something up; ``error``: an
  exception it survived (on the span);
* ``earlier_ms``: time spent on the stage's behalf before it ran (the answer filter's work
  while the answer streamed), charged to it too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from opentelemetry.trace import Span

from tracing.budget.ledger import StageOutcome
from tracing.budget.policy import Plan
from tracing.budget.reserves import Room
from tracing.budget.serving import GenerationResult, ServingNeed
from tracing.budget.stage_names import StageName

Inputs = TypeVar("Inputs", contravariant=True)
Result = TypeVar("Result", bound=StageOutcome, covariant=True)
Event = TypeVar("Event", covariant=True)


@dataclass(frozen=True)
class Allowance:
    """What the budget allows one stage of one request."""

    deadline: float
    """Until when the stage may run (a ``time.perf_counter()`` value)."""
    depth: int
    """How many passages each search finds: as many as a plan may rerank."""
    plan: Plan | None
    """The plan, for the stages after it (rerank's candidates, the prompt's tokens)."""
    room: Callable[[], Room]
    """Whether the stage's learned cost fits what is left, the answer's finish kept: asked by
    a stage that may be left out (attribution)."""

    @property
    def planned(self) -> Plan:
        """The plan (a ``RuntimeError`` for a stage that runs before it)."""
        if self.plan is None:
            raise RuntimeError("this stage runs before the plan")
        return self.plan


@dataclass(frozen=True)
class GenerationAllowance:
    """What the budget allows the answer's generation: the plan's tokens at its target, until
    the deadline less ``reserve_ms`` (or ``stop_at()``, when a request queued behind needs the
    time), ``need`` told to a serving layer that schedules by it, ``span`` current while the
    backend's stream opens (a remote backend propagates it), and ``routed`` to say where the
    request went and what was given up to send it there."""

    deadline: float
    max_tokens: int
    target: str
    reserve_ms: float
    stop_at: Callable[[], float | None]
    need: ServingNeed
    span: Span
    routed: Callable[[str, tuple[str, str] | None], None]


class Stage(Protocol[Inputs, Result]):
    """A stage of a request, as its budget session runs it."""

    @property
    def name(self) -> StageName: ...

    async def run(self, inputs: Inputs, allowance: Allowance) -> Result: ...


class StreamingStage(Protocol[Inputs]):
    """Generation: its text as it comes (``str``), then its ``GenerationResult``."""

    @property
    def name(self) -> StageName: ...

    def span_attributes(self, max_tokens: int) -> dict[str, str | int | float]: ...

    def run(
        self, inputs: Inputs, allowance: GenerationAllowance
    ) -> AsyncIterator[str | GenerationResult]: ...
