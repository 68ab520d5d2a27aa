"""Stages for budget-session tests: what a stage sees of its allowance, and a generation that
yields what a test scripts (``tracing.budget.stage``'s two shapes)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field

from opentelemetry.trace import Span

from tracing.budget import Allowance, BudgetSession, GenerationAllowance, StageName
from tracing.budget.serving import GenerationResult


@dataclass
class Seen:
    """What a ``Probe`` saw: its allowance, and the room it asked for."""

    allowance: Allowance
    units: float = 0.0

    def record(self, span: Span) -> None:
        pass


@dataclass
class Probe:
    """A stage that does no work and keeps what the budget allowed it."""

    name: StageName

    async def run(self, inputs: object, allowance: Allowance) -> Seen:
        return Seen(allowance)


async def allowance_for(session: BudgetSession, stage: StageName) -> Allowance:
    """What ``session`` allows ``stage`` now."""
    seen = await session.run(Probe(stage), None)
    return seen.allowance


@dataclass
class Scripted:
    """A generation that yields ``texts``, then ``ended``; ``during`` runs before it ends (with
    the allowance), as the test's view of the world while the answer streams."""

    ended: GenerationResult
    texts: list[str] = field(default_factory=list)
    during: Callable[[GenerationAllowance], None] = lambda allowance: None
    name: StageName = StageName.GENERATE

    def span_attributes(self, max_tokens: int) -> dict[str, str | int | float]:
        return {"gen_ai.request.max_tokens": max_tokens}

    async def run(
        self, inputs: object, allowance: GenerationAllowance
    ) -> AsyncGenerator[str | GenerationResult, None]:
        for text in self.texts:
            yield text
        self.during(allowance)
        yield self.ended
