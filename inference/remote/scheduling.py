"""What a remote serving layer is told of a request's deadline, in the form each one schedules
by (issue 44):

- **SGLang's ``priority``** (``/generate``): honoured only by a server launched with
  ``--enable-priority-scheduling`` under the ``fcfs`` or ``lof`` policy
  (``python/sglang/srt/managers/schedule_policy.py::SchedulePolicy.calc_priority``), in the
  order ``--schedule-low-priority-values-first`` says; a waiting request preferred by more than
  ``--priority-scheduling-preemption-threshold`` preempts a running one unless
  ``--disable-priority-preemption`` (``PrefillAdder.preempt_to_schedule``). A server that does
  not schedule by priority ignores the field, or refuses it with
  ``--abort-on-priority-when-disabled`` (``managers/scheduler.py::_set_or_validate_priority``),
  so it is sent only where ``/server_info`` (behind SMG, ``/get_server_info``: its first healthy
  worker's, ``routers/http/router.rs::get_server_info``) says the order. The priority is the
  deadline itself (earliest deadline first): wall-clock milliseconds, so that several ragtime
  processes sharing an engine agree, folded into a 32-bit integer because SMG types the field
  ``Option<i32>`` (``crates/protocols/src/generate.rs::GenerateRequest``). The fold wraps every
  49.7 days: for the few seconds around a wrap, deadlines on either side are misordered.
- **llm-d's SLO headers** ``x-llm-d-slo-ttft-ms`` and ``x-llm-d-slo-tpot-ms`` (llm-d-router
  ``pkg/epp/metadata/consts.go``; milliseconds, parsed as floats by the predicted-latency
  scorer), and the same under their older names ``x-slo-ttft-ms`` and ``x-slo-tpot-ms``, which
  that file still accepts after the new ones and earlier releases read alone: the time left at
  sending, shared between the first token and the tokens after it in
  the proportion the plan predicts. A request whose deadline has passed is not sent at all: the
  scorer reads 0 as no SLO and the SLO-deadline ordering as the most urgent
  (``flowcontrol/ordering/slodeadline/slo_deadline.go``).
- **SMG's priority class** ``x-smg-priority`` (``model_gateway/src/middleware/scheduler/
  class.rs``: ``system``, ``interactive``, ``default``, ``bulk``; anything else reads as
  ``default``): from the request's slack, by a mapping in settings (``GatewayClasses``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from inference.backend import Urgency

PriorityOrder = Literal["higher_first", "lower_first"]

#: Policies whose waiting queue SGLang sorts by priority.
_PRIORITY_POLICIES = frozenset({"fcfs", "lof"})
_I32 = 2**31 - 1
#: The classes SMG's scheduler knows, least urgent first.
SMG_CLASSES = ("bulk", "default", "interactive", "system")


@dataclass(frozen=True)
class PriorityScheduling:
    """How an SGLang server orders its waiting queue by ``priority``, as it reports it."""

    order: PriorityOrder
    preempts: bool
    """A preferred waiting request takes a running one's slot."""


def read_priority_scheduling(body: Any) -> PriorityScheduling | Literal[False] | None:
    """From a ``/server_info`` body: the server's priority scheduling; None when it does not
    schedule by priority; False when the body does not say (a router describing itself)."""
    if not isinstance(body, dict) or "enable_priority_scheduling" not in body:
        return False
    if body.get("enable_priority_scheduling") is not True:
        return None
    if str(body.get("schedule_policy") or "fcfs").lower() not in _PRIORITY_POLICIES:
        return None
    low_first = body.get("schedule_low_priority_values_first") is True
    return PriorityScheduling(
        order="lower_first" if low_first else "higher_first",
        preempts=body.get("disable_priority_preemption") is not True,
    )


def deadline_priority(deadline: float, order: PriorityOrder, *, now: float | None = None) -> int:
    """SGLang's ``priority`` for a request due at ``deadline`` (a ``time.perf_counter()``
    value): its wall-clock millisecond, folded into a 32-bit integer, negated where higher
    values go first, so that the earliest deadline is the most preferred."""
    now = time.perf_counter() if now is None else now
    wall_ms = round((time.time() + (deadline - now)) * 1000.0)
    folded = wall_ms % (2 * _I32 + 1) - _I32  # within [-(2**31 - 1), 2**31 - 1]
    return folded if order == "lower_first" else -folded


def slo_headers(urgency: Urgency, *, now: float | None = None) -> dict[str, str]:
    """llm-d's SLO headers for ``urgency`` (none once its deadline has passed)."""
    slo = urgency.slo_ms(now)
    if slo is None:
        return {}
    ttft, tpot = f"{slo[0]:.0f}", f"{slo[1]:.1f}"
    return {
        "x-llm-d-slo-ttft-ms": ttft,
        "x-llm-d-slo-tpot-ms": tpot,
        "x-slo-ttft-ms": ttft,
        "x-slo-tpot-ms": tpot,
    }


@dataclass(frozen=True)
class GatewayClasses:
    """SMG's priority class by a request's slack: the first class whose bound the slack is
    under, else ``rest``. ``parse("interactive<1000,default<10000,bulk")``."""

    bounds: tuple[tuple[str, float], ...]
    rest: str

    @classmethod
    def parse(cls, text: str) -> GatewayClasses:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not parts:
            raise ValueError("expected classes such as 'interactive<1000,default<10000,bulk'")
        bounds: list[tuple[str, float]] = []
        for part in parts[:-1]:
            name, sep, bound = part.partition("<")
            if not sep:
                raise ValueError(f"{part!r}: expected CLASS<SLACK_MS (only the last has no bound)")
            bounds.append((_class(name), float(bound)))
        if "<" in parts[-1]:
            raise ValueError(f"{parts[-1]!r}: the last class has no bound (it takes the rest)")
        if [b for _, b in bounds] != sorted(b for _, b in bounds):
            raise ValueError(f"{text!r}: the bounds must grow from left to right")
        return cls(tuple(bounds), _class(parts[-1]))

    def of(self, slack_ms: float) -> str:
        return next((name for name, bound in self.bounds if slack_ms < bound), self.rest)

    def header(self, urgency: Urgency, *, now: float | None = None) -> Mapping[str, str]:
        return {"x-smg-priority": self.of(urgency.slack_ms(now))}


def _class(name: str) -> str:
    name = name.strip().lower()
    if name not in SMG_CLASSES:
        raise ValueError(f"unknown SMG priority class {name!r} (expected {', '.join(SMG_CLASSES)})")
    return name
