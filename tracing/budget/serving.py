"""What the budget session reads of the generation backend: the targets it may send an answer
to, their reported load and context length, and a generation's result; and what that result
means for the budget (``generation_ended``). Protocols, so that
``tracing`` needs nothing of ``inference``: its backends satisfy them as they are."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from opentelemetry.trace import Span

from tracing.budget.engine import BudgetEngine
from tracing.budget.ledger import BudgetLedger
from tracing.budget.policy import Plan
from tracing.budget.queue import TargetQueue
from tracing.budget.reserves import generation_reserve_ms
from tracing.budget.stage_names import StageName

#: Finish reasons whose timings describe the whole generation at the target.
LEARNED_FINISH_REASONS = frozenset({"stop", "length"})
#: Finish reasons of an answer cut short: no usage comes, but its tokens until the cut were
#: decoded at the target's pace (on a machine slow enough that every answer is cut, they are
#: the only news of it).
CUT_FINISH_REASONS = frozenset({"deadline", "yielded"})


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
    """What a serving target says of its load and order (``inference.TargetLoad`` fits)."""

    @property
    def waiting(self) -> int: ...

    @property
    def max_running(self) -> int | None: ...

    @property
    def others(self) -> int | None: ...

    @property
    def earliest_deadline_first(self) -> bool: ...

    @property
    def preempts(self) -> bool: ...


def target_queue(load: ReportedLoad | None, *, edf: bool, ours: int) -> TargetQueue:
    """How a target queues, as planning sees it: its slots; whether it serves our requests
    earliest deadline first (the backend's own queue, ``edf``, or a server that schedules by
    the deadline it is told, and may preempt for it); others' load.

    Others' load is what the server held at its last poll that was not ours then (``others``:
    a remote server's load is polled every few seconds, and its requests then were mostly ours,
    long finished; counted again, they would refuse requests behind a queue that is gone).
    Where the load does not say, it is the queue beyond the running batch, less what ``ours``
    (our open reservations there) can account for. A server ordering by deadline serves
    requests without one (another client's) after ours: none of them is ahead."""
    slots = max(load.max_running or 1, 1) if load is not None else 1
    if load is None or edf:
        return TargetQueue(slots=slots, edf=edf)
    if load.earliest_deadline_first:
        return TargetQueue(slots=slots, edf=True, preemptive=load.preempts)
    if load.others is not None:
        return TargetQueue(slots=slots, external=load.others)
    return TargetQueue(slots=slots, external=max(load.waiting - max(ours - slots, 0), 0))


@dataclass(frozen=True)
class ServingNeed:
    """What a request's plan needs of the serving layer, for one that schedules by it: the
    last token by ``deadline`` (a ``time.perf_counter()`` value, what the stages after
    generation need already kept), the first ``first_token_ms`` after it starts and each next
    one ``per_token_ms`` later, for ``output_tokens`` (``inference.Urgency`` carries it)."""

    deadline: float
    first_token_ms: float
    per_token_ms: float
    output_tokens: int


def serving_need(engine: BudgetEngine, ledger: BudgetLedger, plan: Plan) -> ServingNeed:
    """``plan``'s need at its target, at the cost model's typical (not tail) figures, the
    generation's reserve before the deadline kept (``reserves.generation_reserve_ms``)."""
    reserve_ms = generation_reserve_ms(engine)
    cost = engine.cost.generation(plan.target)
    prompt_tokens = plan.context_tokens + engine.answer_policy.limits.prompt_overhead_tokens
    return ServingNeed(
        deadline=ledger.deadline - reserve_ms / 1000.0,
        first_token_ms=cost.ttft_ms(prompt_tokens),
        per_token_ms=cost.decode_ms_per_token(),
        output_tokens=plan.max_output_tokens,
    )


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

    @property
    def last_at(self) -> float | None: ...

    @property
    def streamed_tokens(self) -> int: ...

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def may_have_queued(self) -> bool: ...

    @property
    def shared_prefix_tokens(self) -> int | None:
        """The prompt's leading tokens every prompt shares, which the target keeps cached."""


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
