"""What the budget allows each stage of one request (``BudgetSession`` hands it over):

* what the stages after a stage are reserved as it starts (``reserved_after``): its allocation
  is the budget left, less that;
* until when a stage may run (``stage_deadline``): the request's deadline, less, for rerank,
  what the plan's later stages need;
* what the end of an answer keeps before the deadline: the last event and the request's close
  (``finish_reserve_ms``), and while decoding the answer filter's flush too
  (``generation_reserve_ms``);
* whether a stage that may be left out (attribution) fits what is left (``stage_room``);
* what generation is allowed (``generation_allowance``: the plan's tokens at its target, until
  when, when to stop early for a request queued behind), and what a serving layer that
  schedules by deadline is told of the plan's need (``serving_need``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from opentelemetry.trace import Span

from tracing.budget.engine import BudgetEngine
from tracing.budget.ledger import BudgetLedger
from tracing.budget.plan import Plan, PlanLimits
from tracing.budget.queue import Reservation
from tracing.budget.stage_names import StageName


@dataclass(frozen=True)
class Room:
    """Whether a stage that may be left out fits what is left, and until when it may run."""

    fits: bool
    deadline: float
    reason: str = ""


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


def stage_deadline(
    engine: BudgetEngine, ledger: BudgetLedger, plan: Plan | None, stage: StageName
) -> float:
    """Until when ``stage`` may run (a ``time.perf_counter()`` value): the request's deadline,
    less what ``plan``'s later stages need after rerank."""
    deadline = ledger.deadline
    if stage is StageName.RERANK and plan is not None:
        rest_ms = plan.predicted_ms - engine.cost.predict(StageName.RERANK, plan.rerank_candidates)
        return deadline - max(rest_ms, 0.0) / 1000.0
    return deadline


@dataclass(frozen=True)
class LeastToCome:
    """What the stages before the plan leave the rest of a request, as admission counts it (at
    the median of each learned cost, ``BudgetEngine.plan_bounds``): read once per request, when
    what it asks is known (``least_to_come``), and each stage's reservation is then this less
    what has run (``reserved_after``)."""

    reserve_ms: float
    """The plan's reserve, for what no plan sizes (prompt assembly, streaming)."""
    stage_ms: dict[StageName, float]
    """Embed and search; an answer's moderation; the smallest generation, when it generates."""


def least_to_come(
    engine: BudgetEngine, limits: PlanLimits, targets: Sequence[str] = (), answering: bool = False
) -> LeastToCome:
    """The least the stages from embed on need (``LeastToCome``): embed and search, for an
    answer (``answering``) its moderation and, with ``targets``, the smallest generation at the
    cheapest of them. Rerank, which a plan may skip, and the keyword side, which it may drop,
    are counted on for nothing."""
    median = 0.5
    stage_ms = {s: engine.cost.stage(s).rate(median) for s in (StageName.EMBED, StageName.SEARCH)}
    if answering:
        stage_ms[StageName.MODERATE_ANSWER] = engine.cost.stage(StageName.MODERATE_ANSWER).rate(
            median
        )
    if targets:
        stage_ms[StageName.GENERATE] = min(
            engine.smallest_generation_ms(t, median) for t in targets
        )
    return LeastToCome(limits.reserve_ms, stage_ms)


#: Each stage's place in a request's order.
_PLACE = {stage: place for place, stage in enumerate(StageName)}


def reserved_after(
    ledger: BudgetLedger,
    plan: Plan | None,
    stage: StageName,
    limits: PlanLimits,
    least: LeastToCome,
) -> float:
    """What the stages still to come after ``stage`` (those after it in a request's order that
    have not run) are reserved, in ms, as it starts: its allocation is the budget left, less
    this. ``limits`` are the plan's: its ``reserve_ms`` is for what no plan sizes (prompt
    assembly, answer moderation, streaming).

    * Before the plan (auth to keyword search), the least the rest needs, as admission counts it
      (``least``, read once per request): of embed, search, the answer's moderation and the
      smallest generation, those still to come, and the plan's reserve.
    * Once planned, what the plan counts on: after rerank, generation's predicted time (its
      queue wait too) and the plan's reserve, as rerank's deadline keeps them
      (``stage_deadline``); after a stage the plan does not size (the passages' moderation, the
      prompt's assembly, extraction), generation's time: such a stage runs within the reserve.
    * Generation, and what runs after it, leave nothing: the answer's moderation ends within
      generation's span, and attribution runs only where it fits what is left (``stage_room``),
      saying so where it does not. Such a stage is over only when it ran past the budget."""
    place = _PLACE[stage]

    def to_come(later: StageName) -> bool:
        return _PLACE[later] > place and not ledger.ran(later)

    if plan is not None:
        if not to_come(StageName.GENERATE):
            return 0.0
        reserved = plan.generation_ms
        if to_come(StageName.RERANK):
            reserved += plan.stage_ms.get(StageName.RERANK, 0.0)
        return reserved + (limits.reserve_ms if stage is StageName.RERANK else 0.0)
    return least.reserve_ms + sum(ms for later, ms in least.stage_ms.items() if to_come(later))


#: Kept before the deadline to finish an answer: the last event and the request's close.
FINISH_RESERVE_MS = 50.0


def finish_reserve_ms(engine: BudgetEngine) -> float:
    """Kept before the deadline to finish an answer: ``FINISH_RESERVE_MS``, and the event loop's
    recent lag (``BudgetEngine.loop_lag_ms``), which the last event waits behind."""
    return FINISH_RESERVE_MS + engine.loop_lag_ms()


def generation_reserve_ms(engine: BudgetEngine) -> float:
    """Kept before the deadline while decoding: to flush the answer filter and send the last
    event. None is held for attribution: an answer decoded up to the deadline keeps its
    tokens, and its citations go unattributed, saying so."""
    return engine.cost.rate(StageName.MODERATE_ANSWER) + finish_reserve_ms(engine)


def stage_room(engine: BudgetEngine, ledger: BudgetLedger, stage: StageName) -> Room:
    """Whether ``stage`` fits what is left of ``ledger``'s budget (at its learned cost), the
    answer's finish kept (``finish_reserve_ms``), and until when it may run."""
    reserve_ms = finish_reserve_ms(engine)
    left_ms = ledger.remaining_ms - reserve_ms
    needed_ms = engine.cost.rate(stage)
    deadline = ledger.deadline - reserve_ms / 1000.0
    if left_ms <= 0 or left_ms < needed_ms:
        return Room(
            False,
            deadline,
            f"{max(left_ms, 0.0):.0f} ms of the budget left, {stage.value} takes about "
            f"{needed_ms:.0f} ms",
        )
    return Room(True, deadline)


def serving_need(engine: BudgetEngine, ledger: BudgetLedger, plan: Plan) -> ServingNeed:
    """``plan``'s need at its target, at the cost model's typical (not tail) figures, the
    generation's reserve before the deadline kept (``generation_reserve_ms``)."""
    reserve_ms = generation_reserve_ms(engine)
    cost = engine.cost.generation(plan.target)
    prompt_tokens = plan.context_tokens + engine.answer_policy.limits.prompt_overhead_tokens
    return ServingNeed(
        deadline=ledger.deadline - reserve_ms / 1000.0,
        first_token_ms=cost.ttft_ms(prompt_tokens),
        per_token_ms=cost.decode_ms_per_token(),
        output_tokens=plan.max_output_tokens,
    )


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
