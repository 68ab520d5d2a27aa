"""What a stage is to the budget, and what the budget gives it: the seam's two shapes.

A stage is a component with a ``name`` and an async ``run(inputs, allowance)`` (Haystack 2.x's
shape, with the budget's allowance beside the inputs). The pipeline hands it to its request's
``BudgetSession.run(stage, inputs)``, which opens the stage's span, gives it its ``Allowance``
(``allowances``: until when it may run, the plan once made, how deep a search looks, whether an
optional stage fits what is left), records its result, and learns its cost. Generation streams:
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

from collections.abc import AsyncGenerator
from typing import Protocol, TypeVar

from tracing.budget.allowances import Allowance, GenerationAllowance
from tracing.budget.ledger import StageOutcome
from tracing.budget.serving import GenerationResult
from tracing.budget.stage_names import StageName

Inputs = TypeVar("Inputs", contravariant=True)
Result = TypeVar("Result", bound=StageOutcome, covariant=True)
Event = TypeVar("Event", covariant=True)


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
    ) -> AsyncGenerator[str | GenerationResult, None]: ...
