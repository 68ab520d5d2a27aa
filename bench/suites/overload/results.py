"""What the overload bench measured, and how each run is judged (issue 44, sections 1 and 2).

Every request is one of: **useful** (a complete answer of at least a few words within its
budget, ``bench.harness.outcomes``), **refused at arrival** (the server's own count,
``ragtime_admission_refused_total``: a 503, or a 504 for a budget no plan fits, before any
work), a **504 after admission** (admitted, then unable to finish, as a 504 or as its error
at the end of a stream already begun: the engine time it used is wasted), **late** (any
response after its budget on the wire, or none), or another failure. The admitted are those
not refused at arrival.

- **Overload**: goodput (useful answers a second) at least 90% of the capacity a closed loop of
  as many users as the engine has slots measured; 504s after admission at most 2% of the
  admitted; none late.
- **Slowdown**: the engine 3x slower without notice, arrivals unchanged: none late; goodput
  over the slowed part at least 90% of the slowed capacity (a closed loop after it).
- **Priority**: mixed budgets with the engine's priority scheduling off, then on: the tight
  questions' useful share rises by at least 20 points (or reaches 80%), goodput falls by no
  more than 10%, none late.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from bench.harness.client import RequestRecord
from bench.harness.outcomes import is_refused, is_useful
from bench.harness.results import RunHeader
from bench.harness.stats import Summary, summarize

SCHEMA_VERSION = "ragtime-bench-overload/1"
TARGET_GOODPUT_SHARE = 0.9
TARGET_504_SHARE = 0.02
TARGET_TIGHT_GAIN = 0.20
TARGET_TIGHT_SHARE = 0.80
TARGET_GOODPUT_LOSS = 0.10


class Outcomes(BaseModel):
    """How a set of requests fared; see the module docstring."""

    sent: int
    useful: int
    refused_at_arrival: int
    admitted: int
    after_admission_504: int
    late: int
    other: int = Field(description="Neither useful, refused, a 504 nor late (cut-short answers).")
    sent_late: int = Field(
        0, description="Written 20 ms or more after they were due (``SENT_LATE_MS``: the client)."
    )
    degradations: dict[str, int] = Field(default_factory=dict)
    ttft_ms: Summary
    e2e_ms: Summary

    @property
    def useful_share(self) -> float:
        return self.useful / self.sent if self.sent else 0.0

    @property
    def after_admission_504_share(self) -> float:
        return self.after_admission_504 / self.admitted if self.admitted else 0.0


def late(record: RequestRecord) -> bool:
    """No response, or one after the budget on the wire (from when the request was written:
    a client that sent it late on its shared cores is the client's lag, counted apart), or an
    answer the server marked over budget."""
    if record.e2e_ms is None:
        return True
    on_wire = record.e2e_ms - (record.sent_ms or 0.0)
    if record.budget_ms is not None and on_wire > record.budget_ms:
        return True
    return record.status == 200 and bool(record.budget_exceeded)


#: A request written this long after it was due was late on the client's side.
SENT_LATE_MS = 20.0


def outcomes(records: Sequence[RequestRecord], refused_at_arrival: int) -> Outcomes:
    """``records`` judged, with the server's count of those it refused at arrival: the 503s
    are all such refusals, the rest of the count are 504s sent at arrival."""
    useful = sum(1 for r in records if is_useful(r))
    n503 = sum(1 for r in records if r.status == 503)
    n504 = sum(1 for r in records if is_refused(r))  # a 504, or its error in a stream
    refused = min(max(refused_at_arrival, n503), len(records))
    after_504 = max(n504 - (refused - n503), 0)
    overdue = sum(1 for r in records if late(r))
    degradations: dict[str, int] = {}
    for record in records:
        for kind in record.degradations:
            degradations[kind] = degradations.get(kind, 0) + 1
    return Outcomes(
        sent=len(records),
        useful=useful,
        refused_at_arrival=refused,
        admitted=len(records) - refused,
        after_admission_504=after_504,
        late=overdue,
        other=max(len(records) - useful - refused - after_504 - overdue, 0),
        sent_late=sum(1 for r in records if (r.sent_ms or 0.0) >= SENT_LATE_MS),
        degradations=dict(sorted(degradations.items())),
        ttft_ms=summarize(r.ttft_ms for r in records if r.ttft_ms is not None and is_useful(r)),
        e2e_ms=summarize(r.e2e_ms for r in records if r.e2e_ms is not None and is_useful(r)),
    )


class Capacity(BaseModel):
    """A closed loop of as many users as the engine has slots, at a budget nothing binds."""

    users: int
    budget_ms: int
    outcomes: Outcomes
    wall_s: float
    rps: float = Field(description="Useful answers a second.")


def capacity(
    users: int, budget_ms: int, records: Sequence[RequestRecord], wall_s: float
) -> Capacity:
    judged = outcomes(records, 0)
    return Capacity(users=users, budget_ms=budget_ms, outcomes=judged, wall_s=round(wall_s, 3),
                    rps=round(judged.useful / wall_s, 3) if wall_s > 0 else 0.0)  # fmt: skip


class OpenRun(BaseModel):
    """Open-loop arrivals at ``load`` times the capacity, over ``duration_s``."""

    label: str
    load: float
    rate_rps: float
    duration_s: float
    budgets_ms: list[int]
    outcomes: Outcomes
    goodput_rps: float
    by_budget: dict[str, Outcomes] = Field(default_factory=dict)


def open_run(
    label: str,
    load: float,
    rate: float,
    duration_s: float,
    records: Sequence[RequestRecord],
    refused_at_arrival: int,
) -> OpenRun:
    judged = outcomes(records, refused_at_arrival)
    budgets = sorted({int(r.budget_ms) for r in records if r.budget_ms is not None})
    by_budget = {}
    if len(budgets) > 1:  # the server's count cannot be split by budget: the 503s can
        for budget in budgets:
            part = [r for r in records if r.budget_ms == budget]
            by_budget[str(budget)] = outcomes(part, sum(1 for r in part if r.status == 503))
    goodput = round(judged.useful / duration_s, 3)
    return OpenRun(label=label, load=load, rate_rps=round(rate, 3), duration_s=duration_s,
                   budgets_ms=budgets, outcomes=judged, goodput_rps=goodput,
                   by_budget=by_budget)  # fmt: skip


class Slowdown(BaseModel):
    """The engine slowed down ``factor`` times at ``at_s`` into an open run; the slowed
    capacity measured by a closed loop after it."""

    factor: float
    at_s: float
    run: OpenRun
    before: Outcomes
    after: Outcomes
    goodput_after_rps: float
    slowed_capacity: Capacity


class OverloadBench(RunHeader):
    schema_version: str = SCHEMA_VERSION
    engine: str = Field(description="The simulated engine's spec (bench/sglang_sim).")
    slots: int
    capacity: Capacity | None = None
    overload: OpenRun | None = None
    slowdown: Slowdown | None = None
    priority_off: OpenRun | None = None
    priority_on: OpenRun | None = None
