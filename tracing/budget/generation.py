"""The answer's generation as its budget session runs it (``BudgetSession.generate``).

The generate stage is told what the plan allows (``generation_allowance``: its tokens at its
target, until the deadline less the answer's finish, or earlier when a request queued behind
needs the time; what a serving layer that schedules by deadline needs) and streams the answer.
The session's ``Generation`` passes the text on and watches the stream: the first token (the
request's wait at its target is over; time to first token on its histogram and span, against
the request's or the service's target) and how it ended (``serving.generation_ended``: a cut
said as a degradation, the target's costs learned, unless a request due earlier may have
preempted it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from opentelemetry.trace import Span

from tracing import metrics
from tracing.budget.engine import BudgetEngine
from tracing.budget.ledger import BudgetLedger
from tracing.budget.policy import Plan
from tracing.budget.queue import Reservation
from tracing.budget.reserves import generation_reserve_ms
from tracing.budget.serving import GenerationResult, generation_ended, serving_need
from tracing.budget.stage import GenerationAllowance
from tracing.budget.stage_names import StageName


def generation_allowance(
    engine: BudgetEngine,
    ledger: BudgetLedger,
    plan: Plan,
    reservation: Reservation | None,
    *,
    deadline: float,
    span: Span,
) -> GenerationAllowance:
    """What ``plan`` allows its generation (whose span is ``span``), until ``deadline``."""

    def stop_at() -> float | None:
        return reservation.stop_at if reservation is not None else None

    def routed(target: str, degradation: tuple[str, str] | None) -> None:
        if span.is_recording():
            span.set_attribute("ragtime.budget.target", target)
        if degradation is not None:
            ledger.degrade(StageName.GENERATE, *degradation, span)

    return GenerationAllowance(
        deadline=deadline,
        max_tokens=plan.max_output_tokens,
        target=plan.target,
        reserve_ms=generation_reserve_ms(engine),
        stop_at=stop_at,
        need=serving_need(engine, ledger, plan),
        span=span,
        routed=routed,
    )


class Generation:
    """An answer streaming from its target: iterate it for its text; then ``result`` says how
    it ended, ``ttft_ms`` when its first token came (in the request's time), ``span`` is the
    generate stage's. Where the target may preempt (``preemptive``), an answer that a request
    due earlier overtook teaches nothing of the target's pace."""

    def __init__(
        self,
        engine: BudgetEngine,
        ledger: BudgetLedger,
        reservation: Reservation | None,
        events: AsyncIterator[str | GenerationResult],
        span: Span,
        *,
        preemptive: bool,
    ) -> None:
        self.engine = engine
        self.ledger = ledger
        self.reservation = reservation
        self.span = span
        self.preemptive = preemptive
        self.result: GenerationResult | None = None
        self.ttft_ms: float | None = None
        self._events = events

    async def __aiter__(self) -> AsyncIterator[str]:
        async for event in self._events:
            if not isinstance(event, str):
                self.result = event
                self._ended(event)
                return
            if self.ttft_ms is None:
                self._first_token()
            yield event

    async def aclose(self) -> None:
        """Close the stage's stream (a client gone: the backend stops decoding)."""
        close = getattr(self._events, "aclose", None)
        if close is not None:
            await close()

    def _first_token(self) -> None:
        ledger, span = self.ledger, self.span
        if self.reservation is not None:
            self.reservation.first_token()
        ttft_ms = self.ttft_ms = ledger.spent_ms
        limits = self.engine.answer_policy.limits
        target_ms = ledger.ttft_target_ms or limits.ttft_target_ms or 0.0
        metrics.TTFT_SECONDS.observe(ttft_ms / 1000.0)
        span.add_event("first_token", {"ragtime.ttft_ms": ttft_ms})
        span.set_attribute("ragtime.ttft.over_target", 0 < target_ms < ttft_ms)

    def _ended(self, generated: GenerationResult) -> None:
        reservation = self.reservation
        overtaken = self.preemptive and reservation is not None and reservation.overtaken()
        generation_ended(
            self.engine,
            self.ledger,
            generated,
            self.span,
            learn=not overtaken,
            shared_prefix_tokens=generated.shared_prefix_tokens,
        )
