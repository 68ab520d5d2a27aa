"""The budget engine's errors: one base, so that a caller (the CLI, the app) can catch them all.

    BudgetError                 anything the budget could not grant
    ├── BudgetInfeasible        not even the smallest plan fits the time left (504)
    │   └── QueueInfeasible     it would alone, not behind the target's queue (503)
    ├── DeadlinePassed          a stage was still running, or the answer was cut too short,
    │                           when the budget ran out (504)
    └── TargetSaturated         a serving target's queue is full: refused at arrival (503)

Each carries what the HTTP boundary answers with (``status_code`` and ``error_type``), which
``app/http/errors.py`` maps in one place; nothing between the budget and the boundary
translates them.
"""

from __future__ import annotations


class BudgetError(Exception):
    """Base class of the budget engine's errors."""

    status_code = 504
    error_type = "deadline_exceeded"


class BudgetInfeasible(BudgetError):
    """Not even the smallest plan fits what is left of the budget."""

    def __init__(self, needed_ms: float, remaining_ms: float) -> None:
        self.needed_ms = needed_ms
        self.remaining_ms = remaining_ms
        super().__init__(
            f"the budget cannot be met: the smallest plan needs about {needed_ms:.0f} ms "
            f"and {max(remaining_ms, 0.0):.0f} ms remain"
        )


class QueueInfeasible(BudgetInfeasible):
    """The smallest plan alone fits what is left, but not after the wait at its target: the
    service is overloaded, not the budget too small (the session refuses it as saturated)."""

    def __init__(self, needed_ms: float, remaining_ms: float, *, wait_ms: float, target: str):
        super().__init__(needed_ms, remaining_ms)
        self.args = (
            f"the queue at {target} is {wait_ms:.0f} ms long; the smallest answer takes "
            f"{needed_ms - wait_ms:.0f} ms more, and {max(remaining_ms, 0.0):.0f} ms are left",
        )


class DeadlinePassed(BudgetError):
    """A stage's work was still running when the request's budget ran out, or the deadline cut
    the answer before it was useful."""


class TargetSaturated(BudgetError):
    """A target's queue is full: refuse the request at arrival, before any of its work."""

    status_code = 503
    error_type = "overloaded"
