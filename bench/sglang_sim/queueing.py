"""The simulated engine's running batch and waiting queue, in the order SGLang 0.5.23 serves
them (under ``python/sglang/srt/`` of sgl-project/sglang):

- Without ``--enable-priority-scheduling`` the waiting queue is first come, first served, and
  a request's ``priority`` is ignored (``managers/schedule_policy.py::SchedulePolicy.
  calc_priority``, policy ``fcfs``, the default).
- With it, the queue is sorted by ``priority`` (higher values first, or lower ones with
  ``--schedule-low-priority-values-first``), then by the time each entered the queue
  (``_sort_by_priority_and_fcfs``, whose key is ``priority * priority_sign``). A request with
  no priority gets the least preferred value (``managers/scheduler.py::
  _set_or_validate_priority``).
- When the running batch is full, a waiting request whose priority beats a running one's by
  more than ``--priority-scheduling-preemption-threshold`` (10) preempts it
  (``PrefillAdder.preempt_to_schedule``, called from ``Scheduler._get_new_batch_prefill_raw``
  once ``batch_is_full``): the running request goes back to the waiting queue, keeps what it
  has generated and is prefilled again when its turn comes. ``--disable-priority-preemption``
  turns this off.
- With ``--max-queued-requests``, a request the full queue cannot take is aborted; under
  priority scheduling the least preferred waiting request is aborted instead when the newcomer
  is strictly preferred to it (``Scheduler._abort_on_queued_limit``).

One ``Turn`` per request: ``Batch.join`` queues it, ``admitted`` is set while it holds a slot of
the running batch, ``Batch.leave`` gives the slot back.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Order:
    """How the waiting queue is served: the launch flags above."""

    max_running: int = 64
    priority_scheduling: bool = False
    low_values_first: bool = False
    preemption: bool = True
    preemption_threshold: int = 10

    @property
    def sign(self) -> int:
        """``priority_sign``: sorting by ``priority * sign`` puts the preferred first."""
        return 1 if self.low_values_first else -1

    def priority_of(self, given: int | None) -> int:
        """A request's priority as the scheduler keeps it: the least preferred when none."""
        if given is not None:
            return given
        return sys.maxsize if self.low_values_first else -sys.maxsize - 1


@dataclass(eq=False)
class Turn:
    """One request's place: waiting, or holding a slot (``admitted`` set)."""

    rid: str
    priority: int
    entered: int
    admitted: asyncio.Event = field(default_factory=asyncio.Event)
    preempted: int = 0
    """How many times a preferred request took its slot."""


class Batch:
    """The running batch (at most ``order.max_running``) and the queue waiting for it.

    ``on_preempt(turn)`` is called when a running request loses its slot (its decode loop must
    stop and wait for ``admitted`` again)."""

    def __init__(self, order: Order, on_preempt: Callable[[Turn], None]) -> None:
        self.order = order
        self.waiting: list[Turn] = []
        self.running: list[Turn] = []
        self._on_preempt = on_preempt
        self._clock = itertools.count()

    @property
    def full(self) -> bool:
        return len(self.running) >= self.order.max_running

    def join(self, rid: str, priority: int | None) -> Turn:
        turn = Turn(rid, self.order.priority_of(priority), next(self._clock))
        self.waiting.append(turn)
        self._schedule()
        return turn

    def leave(self, turn: Turn) -> None:
        """``turn`` is done (finished, aborted or evicted): its slot or place is free."""
        if turn in self.running:
            self.running.remove(turn)
        elif turn in self.waiting:
            self.waiting.remove(turn)
        turn.admitted.clear()
        self._schedule()

    def to_evict_for(self, priority: int | None) -> Turn | None:
        """The waiting request a newcomer of ``priority`` pushes out of a full queue, under
        priority scheduling (the least preferred, the newest of equals), when the newcomer is
        strictly preferred to it; None: the newcomer is the one refused."""
        if not self.order.priority_scheduling or not self.waiting:
            return None
        sign = self.order.sign
        worst = max(self.waiting, key=lambda t: (sign * t.priority, t.entered))
        if sign * self.order.priority_of(priority) < sign * worst.priority:
            return worst
        return None

    def _key(self, turn: Turn) -> tuple[int, int]:
        if self.order.priority_scheduling:
            return (self.order.sign * turn.priority, turn.entered)
        return (0, turn.entered)

    def _schedule(self) -> None:
        """Fill free slots from the head of the queue; then, under priority scheduling, let the
        head preempt the least preferred running request while it beats it by more than the
        threshold."""
        while self.waiting:
            head = min(self.waiting, key=self._key)
            if self.full and not self._preempt_for(head):
                return
            self.waiting.remove(head)
            self.running.append(head)
            head.admitted.set()

    def _preempt_for(self, head: Turn) -> bool:
        order = self.order
        if not (order.priority_scheduling and order.preemption and self.running):
            return False
        victim = max(self.running, key=self._key)
        if (head.priority - victim.priority) * -order.sign <= order.preemption_threshold:
            return False
        self.running.remove(victim)
        victim.admitted.clear()
        victim.preempted += 1
        victim.entered = next(self._clock)
        self.waiting.append(victim)
        self._on_preempt(victim)
        return True
