"""What the end of an answer keeps before its deadline: the last event and the request's close
(``finish_reserve_ms``), the answer filter's flush while decoding (``generation_reserve_ms``),
and whether a stage that may be left out (attribution) fits what is left (``stage_room``)."""

from __future__ import annotations

from dataclasses import dataclass

from tracing.budget.engine import BudgetEngine
from tracing.budget.ledger import BudgetLedger
from tracing.budget.stage_names import StageName

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


@dataclass(frozen=True)
class Room:
    """Whether a stage that may be left out fits what is left, and until when it may run."""

    fits: bool
    deadline: float
    reason: str = ""


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
