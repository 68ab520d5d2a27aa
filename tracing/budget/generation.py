"""The answer's generation as its budget session runs it (``BudgetSession.generate``).

The generate stage is told what the plan allows (``allowances.generation_allowance``) and
streams the answer.
The session's ``Generation`` passes the text on and watches the stream: the first token (the
request's wait at its target is over; time to first token on its histogram, its span and the
request's ledger, against the request's or the service's target) and how it ended
(``generation_ended``: a cut said as a degradation, the target's costs learned, unless a
request due earlier may have preempted it).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator

from opentelemetry.trace import Span

from tracing import metrics
from tracing.budget.engine import BudgetEngine
from tracing.budget.ledger import BudgetLedger
from tracing.budget.queue import Reservation
from tracing.budget.serving import GenerationResult
from tracing.budget.stage_names import StageName


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
        events: AsyncGenerator[str | GenerationResult, None],
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
        await self._events.aclose()

    def _first_token(self) -> None:
        ledger, span = self.ledger, self.span
        if self.reservation is not None:
            self.reservation.first_token()
        ttft_ms = self.ttft_ms = ledger.first_token()
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


#: Finish reasons whose timings describe the whole generation at the target.
LEARNED_FINISH_REASONS = frozenset({"stop", "length"})
#: Finish reasons of an answer cut short: no usage comes, but its tokens until the cut were
#: decoded at the target's pace (on a machine slow enough that every answer is cut, they are
#: the only news of it).
CUT_FINISH_REASONS = frozenset({"deadline", "yielded"})


def generation_ended(
    engine: BudgetEngine,
    ledger: BudgetLedger,
    generated: GenerationResult,
    span: Span,
    *,
    shared_prefix_tokens: int | None,
    learn: bool = True,
) -> None:
    """How generation ended, as a degradation when the budget cut it (the deadline, or a
    request behind that needed the time), on ``span``; and, unless told not to ``learn``,
    from an answer that ended on its own, what ``generated.target``'s prefill and decode cost
    (our queue aside); from one cut short, what its decode cost until the cut, and its first
    token's time where no queue can be in it (sent to a target with a free slot). Where every
    answer is cut (a machine slowed by other processes), those are the only news of the
    slowdown: a plan that counted on the quiet machine's first token was cut again and again
    (issue 56)."""
    if generated.finish_reason == "yielded":
        reason = "stopped early: a request queued behind it needed the time"
        ledger.degrade(StageName.GENERATE, "output_capped", reason, span)
    elif generated.finish_reason == "deadline":
        reason = "decoding stopped at the deadline"
        ledger.degrade(StageName.GENERATE, "deadline_stop", reason, span)
    usage, first_at = generated.usage, generated.first_at
    if usage is not None and span.is_recording():
        span.set_attribute("ragtime.generate.queue_ms", round(generated.queue_ms, 3))
    if not learn:
        return
    last_at = generated.last_at
    if generated.finish_reason in CUT_FINISH_REASONS and first_at is not None and last_at:
        if generated.streamed_tokens > 1:
            engine.cost.generation(generated.target).observe_decode(
                generated.streamed_tokens - 1, (last_at - first_at) * 1000.0
            )
        if not generated.may_have_queued and generated.prompt_tokens > 0:
            engine.observe_cut_first_token(
                generated.target, generated.prompt_tokens, (first_at - generated.started) * 1000.0
            )
        return
    if generated.finish_reason not in LEARNED_FINISH_REASONS or first_at is None or not usage:
        return
    engine.observe_generation(
        generated.target,
        prompt_tokens=usage.prompt_tokens,
        cached_tokens=usage.cached_tokens,
        ttft_ms=(first_at - generated.started) * 1000.0 - generated.queue_ms,
        output_tokens=usage.completion_tokens,
        decode_ms=(time.perf_counter() - first_at) * 1000.0,
        shared_prefix_tokens=shared_prefix_tokens,
    )
