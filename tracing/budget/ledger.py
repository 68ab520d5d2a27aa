"""The per-request budget ledger: every stage runs in its own span and is charged its time.

A ``BudgetLedger`` is created when a request arrives (before auth). Each stage runs inside
``ledger.stage(name)`` (a current span, for ordinary code) or ``ledger.begin(name)`` (a span that
is not made current, for work that spans the yields of a stream), told what the stages after it
are reserved (``reserved_ms``: the request's budget session works it out from the plan,
``allowances.reserved_after``). A stage's **allocation** is what the plan gives it when it
starts: the budget left then, less that reservation, so that time a stage did not use flows to
the stages after it (a skipped rerank's to generation). A stage is ``exceeded`` when a run of it
ran past its allocation (past the budget less what was reserved after it; a stage that began
when that point had already passed, the rest out of reach before it ran, answers to the budget
alone); the request is exceeded only when it ran past its budget.

When a stage ends, its wall time is charged to the ledger, observed in the stage histogram (one
observation, with the trace id as exemplar when the trace is sampled), and written on its span
(a sampled-out span records nothing, and is given nothing): ``ragtime.budget.allocated_ms``,
``spent_ms`` and ``exceeded`` (the stage's, as the waterfall shows them), ``remaining_ms`` (the
request's). A stage the plan predicted (``expect``) also gets ``ragtime.budget.predicted_ms``,
and its actual/predicted ratio goes to the ``ragtime_budget_prediction_error_ratio`` histogram.
Deliberate degradations are recorded with ``degrade``; the request's root span gets the totals
and the stages that overran. ``stages()`` gives each stage's start, spent and allocated
milliseconds and whether it overran: the request's waterfall, as its report and its
``Server-Timing`` header show it; ``ragtime_stage_budget_exceeded_total`` counts the same
overruns, for the dashboard and the alerts.
The request's first answer token is stamped on it (``first_token``), in the request's time.

The ledger reads its own ``clock`` (``time.perf_counter`` unless a test gives another).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode

from tracing import metrics

if TYPE_CHECKING:
    from tracing.budget.door.ticket import Ticket

tracer = trace.get_tracer(__name__)


class StageOutcome(Protocol):
    """A stage's result, as the session records it on the stage's span
    (``app.stages.result.StageResult``)."""

    def record(self, span: Span) -> None: ...


Outcome = TypeVar("Outcome", bound=StageOutcome)


@dataclass(frozen=True)
class Degradation:
    """Something the pipeline chose to do with less, and why."""

    stage: str
    action: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"stage": self.stage, "action": self.action, "reason": self.reason}


@dataclass(frozen=True)
class StageRecord:
    """One stage of a request, as the ledger charged it: when it started (ms from the request's
    arrival; its first run, for a stage charged more than once), what it spent, what it was
    allocated (from its start until the budget less what was reserved after it) and whether a
    run of it ran past that. A stage's runs may overlap another's (the answer's filter runs
    while it streams)."""

    stage: str
    start_ms: float
    spent_ms: float
    allocated_ms: float
    exceeded: bool


def _stage_span(name: str, attributes: dict[str, Any]) -> Span:
    """A stage's span, a child of the current one; in a request whose trace is sampled out, the
    request's own span, which records nothing and carries the trace id downstream all the same:
    such a request opens no span per stage (and ending it, a no-op, ends nothing)."""
    current = trace.get_current_span()
    context = current.get_span_context()
    if context.is_valid and not context.trace_flags.sampled and not current.is_recording():
        return current
    return tracer.start_span(name, attributes=attributes or None)


class StageSpan:
    """A started stage whose span is not the current one; ``end()`` charges it."""

    def __init__(self, ledger: BudgetLedger, name: str, span: Span) -> None:
        self.ledger = ledger
        self.name = name
        self.span = span
        self.started = ledger.clock()
        self._ended = False

    def end(self, error: BaseException | None = None) -> float:
        """End the span (marking ``error`` on it, if given) and charge the stage; idempotent."""
        if self._ended:
            return 0.0
        self._ended = True
        elapsed_ms = (self.ledger.clock() - self.started) * 1000.0
        if error is not None:
            self.span.record_exception(error)
            self.span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        self.ledger.charge(self.name, elapsed_ms, self.span, started=self.started)
        self.span.end()
        return elapsed_ms


class BudgetLedger:
    """What one request may spend, what each stage spent, and what was given up."""

    def __init__(
        self,
        budget_ms: float,
        *,
        started_at: float | None = None,
        ticket: Ticket | None = None,
        budget_pending: bool = False,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.budget_ms = float(budget_ms)
        self.clock = clock
        """The request's clock (``time.perf_counter`` values): arrival, stages and deadline."""
        self.budget_pending = budget_pending
        """True until the request's own budget is read (``set_budget``): a stage that ends
        before then (auth, which runs before the body is read) is charged then, against that
        budget, and its span ended where the stage ended (``stage``)."""
        self._held: list[tuple[str, float, Span, float, int]] = []
        self.ticket = ticket
        """The request's admission ticket (``tracing.budget.door.book``), where the front door
        admitted it by predicted finish: its session says when its work waits on a model."""
        self.started_at = clock() if started_at is None else started_at
        self._timings: dict[str, float] = {}
        self._starts: dict[str, float] = {}
        self._reserved: dict[str, float] = {}
        """What the stages after each stage were reserved when it last started (ms)."""
        self._allocated: dict[str, float] = {}
        self._expected: dict[str, float] = {}
        self.degradations: list[Degradation] = []
        self.overruns: list[str] = []
        self.ttft_target_ms: float | None = None
        """The caller's own time-to-first-token target (ms from arrival), if it gave one: plans
        then prefer a first token within it, as they do the service's."""
        self.ttft_ms: float | None = None
        """When the answer's first token came, in ms from arrival (``first_token``)."""

    @property
    def deadline(self) -> float:
        """The ``clock`` value at which the budget runs out."""
        return self.started_at + self.budget_ms / 1000.0

    def allocated_ms(self, stage: str) -> float:
        """What ``stage`` was allocated: from its first start until the budget less what the
        stages after it were reserved (0 before it is charged)."""
        return self._allocated.get(stage, 0.0)

    def ran(self, stage: str) -> bool:
        """Whether ``stage`` has been charged."""
        return stage in self._timings

    def first_token(self) -> float:
        """Stamp the answer's first token now (the first stamp stands); its ms from arrival."""
        if self.ttft_ms is None:
            self.ttft_ms = self.spent_ms
        return self.ttft_ms

    @property
    def spent_ms(self) -> float:
        return (self.clock() - self.started_at) * 1000.0

    @property
    def remaining_ms(self) -> float:
        return self.budget_ms - self.spent_ms

    @property
    def exceeded(self) -> bool:
        return self.spent_ms > self.budget_ms

    @property
    def timings_ms(self) -> dict[str, float]:
        return {stage: round(ms, 3) for stage, ms in self._timings.items()}

    def stages(self) -> list[StageRecord]:
        """Every stage charged so far, in the order they started."""
        return sorted(
            (
                StageRecord(
                    stage=stage,
                    start_ms=round(self._starts[stage], 3),
                    spent_ms=round(spent, 3),
                    allocated_ms=round(self.allocated_ms(stage), 3),
                    exceeded=stage in self.overruns,
                )
                for stage, spent in self._timings.items()
            ),
            key=lambda record: record.start_ms,
        )

    def expect(self, stage: str, predicted_ms: float) -> None:
        """The plan's prediction for ``stage``, compared with what it spends when it ends."""
        self._expected[stage] = predicted_ms

    def charge(
        self,
        stage: str,
        elapsed_ms: float,
        span: Span | None = None,
        *,
        started: float | None = None,
    ) -> None:
        """Add ``elapsed_ms`` to ``stage``, which ran from ``started`` (a ``clock`` value; by
        default, ``elapsed_ms`` before now), against its allocation; write the stage's budget
        figures on ``span`` (when its trace is sampled). The metrics observe the run's time (one
        observation; a stage the plan predicted, its actual/predicted ratio too) and count the
        stage's first overrun."""
        spent = self._timings.get(stage, 0.0) + elapsed_ms
        self._timings[stage] = spent
        if started is None:
            started = self.clock() - elapsed_ms / 1000.0
        start_ms = (started - self.started_at) * 1000.0
        first_ms = self._starts.setdefault(stage, start_ms)
        until_ms = self.budget_ms - self._reserved.get(stage, 0.0)
        if first_ms >= until_ms:
            # What comes after was out of reach before this stage began: the plan cannot be
            # kept, and this stage is not what broke it; it answers to the budget alone.
            until_ms = self.budget_ms
        allocated = max(until_ms - first_ms, 0.0)
        if allocated > self._allocated.get(stage, -1.0):  # a later run may be given until later
            self._allocated[stage] = allocated
        # Judged at the microsecond the figures are reported in.
        if round(start_ms + elapsed_ms, 3) > round(until_ms, 3) and stage not in self.overruns:
            self.overruns.append(stage)
            metrics.stage_child(metrics.STAGE_BUDGET_EXCEEDED, stage).inc()
        context = (span or trace.get_current_span()).get_span_context()
        sampled = context.trace_flags.sampled  # an exemplar links only to a trace that is kept
        exemplar = {"trace_id": format(context.trace_id, "032x")} if sampled else None
        metrics.stage_child(metrics.STAGE_SECONDS, stage).observe(elapsed_ms / 1000.0, exemplar)
        predicted = self._expected.pop(stage, None) if span is not None else None
        if predicted is not None and predicted > 0:
            metrics.stage_child(metrics.PREDICTION_ERROR_RATIO, stage).observe(spent / predicted)
        if span is not None and span.is_recording():
            if predicted is not None:
                span.set_attribute("ragtime.budget.predicted_ms", round(predicted, 3))
            span.set_attributes(
                {
                    "ragtime.stage.duration_ms": round(elapsed_ms, 3),
                    "ragtime.budget.budget_ms": self.budget_ms,
                    "ragtime.budget.allocated_ms": round(self.allocated_ms(stage), 3),
                    "ragtime.budget.spent_ms": round(spent, 3),
                    "ragtime.budget.remaining_ms": round(self.remaining_ms, 3),
                    "ragtime.budget.exceeded": stage in self.overruns,
                }
            )

    @contextmanager
    def stage(self, name: str, *, reserved_ms: float = 0.0, **attributes: Any) -> Iterator[Span]:
        """Run a block as stage ``name`` in a current child span, allocated the budget left less
        ``reserved_ms`` (what the stages after it are reserved); exceptions mark it as failed.
        While the budget is pending, the stage's charge and its span's end wait for it."""
        started = self.clock()
        self._reserved[name] = reserved_ms
        span = _stage_span(name, attributes)
        own = span is not trace.get_current_span()  # else the sampled-out request's: current
        try:
            with trace.use_span(span, end_on_exit=False) if own else contextlib.nullcontext():
                yield span
        finally:
            elapsed_ms = (self.clock() - started) * 1000.0
            if self.budget_pending:
                self._held.append((name, elapsed_ms, span, started, time.time_ns()))
            else:
                self.charge(name, elapsed_ms, span, started=started)
                span.end()

    def set_budget(self, budget_ms: float | None = None) -> None:
        """The request's own budget, once read (None: it keeps the one it has): the stages held
        until now are charged against it, and their spans ended where they ended. Once set, a
        later call changes nothing."""
        if not self.budget_pending:
            return
        if budget_ms is not None:
            self.budget_ms = float(budget_ms)
        self.budget_pending = False
        held, self._held = self._held, []
        for name, elapsed_ms, span, started, ended_ns in held:
            self.charge(name, elapsed_ms, span, started=started)
            span.end(end_time=ended_ns)

    def begin(self, name: str, *, reserved_ms: float = 0.0, **attributes: Any) -> StageSpan:
        """Start stage ``name`` as a child of the current span without making it current,
        allocated the budget left less ``reserved_ms`` (as ``stage``)."""
        self._reserved[name] = reserved_ms
        return StageSpan(self, name, _stage_span(name, attributes))

    def degrade(self, stage: str, action: str, reason: str, span: Span | None = None) -> None:
        """Record a deliberate degradation on the ledger, its span and the metrics."""
        self.degradations.append(Degradation(stage, action, reason))
        metrics.DEGRADATIONS.labels(stage=stage, action=action).inc()
        target = span if span is not None else trace.get_current_span()
        if target.is_recording():
            target.set_attribute("ragtime.degraded", action)
            target.add_event("degraded", {"action": action, "reason": reason})

    def summary(self) -> dict[str, Any]:
        spent = self.spent_ms
        return {
            "budget_ms": self.budget_ms,
            "spent_ms": round(spent, 3),
            "remaining_ms": round(self.budget_ms - spent, 3),
            "exceeded": spent > self.budget_ms,
        }

    def annotate(self, span: Span) -> None:
        """Write the request's totals on its root span."""
        if not span.is_recording():
            return
        summary = self.summary()
        span.set_attributes(
            {
                "ragtime.budget.budget_ms": summary["budget_ms"],
                "ragtime.budget.spent_ms": summary["spent_ms"],
                "ragtime.budget.remaining_ms": summary["remaining_ms"],
                "ragtime.budget.exceeded": summary["exceeded"],
                "ragtime.budget.overrun_stages": list(self.overruns),
                "ragtime.degradations": [d.action for d in self.degradations],
            }
        )
