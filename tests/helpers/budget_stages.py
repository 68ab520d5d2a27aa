"""Stages for budget-session tests: what a stage sees of its allowance, a generation that yields
what a test scripts (``tracing.budget.stage``'s two shapes), how a generation ended
(``Ended``), and stages that take the time a test says on a request's clock (``RequestClock``)."""

from __future__ import annotations

import time
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


@dataclass
class Usage:
    prompt_tokens: int = 300
    cached_tokens: int = 0
    completion_tokens: int = 21


@dataclass
class Ended:
    """How a generation ended (``tracing.budget.serving.GenerationResult``)."""

    finish_reason: str
    target: str = "large"
    started: float = 0.0
    first_at: float | None = None
    usage: Usage | None = None
    queue_ms: float = 0.0
    last_at: float | None = None
    streamed_tokens: int = 0
    prompt_tokens: int = 0
    may_have_queued: bool = True
    shared_prefix_tokens: int | None = None


class RequestClock:
    """A request's clock that moves only when a test says (``BudgetLedger(clock=...)``); it
    starts at the process's ``perf_counter``, so that the deadlines it gives compare with what
    reads the real one."""

    def __init__(self) -> None:
        self.now = time.perf_counter()

    def __call__(self) -> float:
        return self.now

    def advance(self, ms: float) -> None:
        self.now += ms / 1000.0


@dataclass
class Took:
    """A stage's result that teaches nothing (``units`` 0): the costs stay as a test seeds them."""

    units: float = 0.0

    def record(self, span: Span) -> None:
        pass


@dataclass
class Takes:
    """A stage that takes ``ms`` of ``clock``'s time; an ``optional`` one (attribution) none
    when its allowance says it does not fit."""

    name: StageName
    clock: RequestClock
    ms: float
    optional: bool = False

    async def run(self, inputs: object, allowance: Allowance) -> Took:
        if not self.optional or allowance.room().fits:
            self.clock.advance(self.ms)
        return Took()


@dataclass
class Generates:
    """A generation that decodes for ``ms`` of ``clock``'s time, or until its allowance says to
    stop (its deadline less its reserve), as the generate stage does; one piece of text, then
    how it ended (no usage: nothing learned)."""

    clock: RequestClock
    ms: float
    name: StageName = StageName.GENERATE

    def span_attributes(self, max_tokens: int) -> dict[str, str | int | float]:
        return {"gen_ai.request.max_tokens": max_tokens}

    async def run(
        self, inputs: object, allowance: GenerationAllowance
    ) -> AsyncGenerator[str | GenerationResult, None]:
        stop = allowance.deadline - allowance.reserve_ms / 1000.0
        until = min(self.clock.now + self.ms / 1000.0, stop)
        self.clock.now = max(until, self.clock.now)
        yield "an answer"
        yield Ended("deadline" if until == stop else "stop", target=allowance.target)
