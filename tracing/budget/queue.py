"""Contention: the generation work already promised to each target, and the wait it implies.

Every request that is planned reserves its predicted generation time (``Reservation``) at the
target that will serve it, with its deadline. A new request's wait is the work ahead of it
divided among the target's slots (1 for the in-process llama.cpp worker, the running batch for
SGLang). For a target served earliest-deadline-first, only requests with an earlier deadline
(or already running) are ahead. Every request stops at its own deadline, so no request ahead
holds its slot past that: the wait is capped by the latest deadline ahead. That is what lets the
policy shrink each queued request's plan instead of refusing the late ones: the wait it counts
is what the requests ahead can really take, not one average service time each.

When even so a newcomer would be refused behind a single request on a single slot, that request
is asked to stop early (``ask_to_stop``), after at least the smallest plan's generation time,
so that both get an answer: its answer is cut short, the newcomer's is not refused.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

#: Starts remembered per target, to tell whether a request was overtaken while it generated.
RECENT_STARTS = 512


@dataclass(eq=False)
class Reservation:
    target: str
    deadline: float
    """``time.perf_counter()`` value by which the request is stopped."""
    service_ms: float
    """Predicted time from sending to the last token."""
    started: float | None = None
    first_at: float | None = None
    """When its first token came: before, it may still wait in the target's own queue."""
    released: bool = False
    stop_at: float | None = None
    """Set when a request queued behind this one needs the time: stop decoding by then."""
    _book: Reservations | None = field(default=None, repr=False)

    def ask_to_stop(self, at: float) -> None:
        """Finish by ``at`` (a ``time.perf_counter()`` value), so that a later request fits."""
        self.stop_at = at if self.stop_at is None else min(self.stop_at, at)

    def start(self) -> None:
        """Generation began (the request left our queue)."""
        if self.started is None:
            self.started = time.perf_counter()
            if self._book is not None:
                self._book.started(self)

    def first_token(self) -> None:
        if self.first_at is None:
            self.first_at = time.perf_counter()

    def overtaken(self) -> bool:
        """Whether a request due before this one was sent to its target after this one was: at
        a target that preempts for an earlier deadline, this one may have waited meanwhile, and
        its timings are not the target's pace."""
        return self._book is not None and self._book.overtook(self)

    def release(self) -> None:
        if self._book is not None and not self.released:
            self._book.release(self)

    def remaining_ms(self, now: float) -> float:
        """What is left of its predicted service, counted from its first token: sent, it may
        still wait in the target's queue (a remote server's, the worker's), and its service
        has not begun; counted from its sending, a queue of sent requests looked drained
        while it still held them all, and admitted requests that were then cut short."""
        left = self.service_ms
        if self.first_at is not None:
            left -= (now - self.first_at) * 1000.0
        end = self.deadline if self.stop_at is None else min(self.deadline, self.stop_at)
        return max(min(left, (end - now) * 1000.0), 0.0)


@dataclass(frozen=True)
class Wait:
    ms: float
    ahead: int
    """Requests counted ahead of this one."""
    slots: int
    reservations: tuple[Reservation, ...] = ()
    """Our own reservations counted ahead."""


class Reservations:
    """The open reservations of every target."""

    def __init__(self) -> None:
        self._by_target: dict[str, list[Reservation]] = {}
        self._starts: dict[str, deque[tuple[float, float]]] = {}
        """Per target, the last ``RECENT_STARTS`` starts: when, and due when."""
        self._lock = threading.Lock()

    def reserve(self, target: str, deadline: float, service_ms: float) -> Reservation:
        res = Reservation(target, deadline, service_ms, _book=self)
        with self._lock:
            self._by_target.setdefault(target, []).append(res)
        return res

    def started(self, res: Reservation) -> None:
        with self._lock:
            starts = self._starts.setdefault(res.target, deque(maxlen=RECENT_STARTS))
            starts.append((res.started or time.perf_counter(), res.deadline))

    def overtook(self, res: Reservation) -> bool:
        """Whether a reservation due before ``res`` started after it (``Reservation.overtaken``);
        True when too many started since to tell."""
        if res.started is None:
            return False
        with self._lock:
            starts = list(self._starts.get(res.target, ()))
        if len(starts) == RECENT_STARTS and starts[0][0] > res.started:
            return True
        return any(at > res.started and due < res.deadline for at, due in starts)

    def release(self, res: Reservation) -> None:
        with self._lock:
            res.released = True
            held = self._by_target.get(res.target, [])
            if res in held:
                held.remove(res)

    def open(self, target: str, now: float | None = None) -> int:
        """The reservations held at ``target``: those not released, their deadline not long
        past (``_live``)."""
        with self._lock:
            return len(self._live(target, time.perf_counter() if now is None else now))

    def _live(self, target: str, now: float) -> list[Reservation]:
        """``target``'s reservations, less those whose owner never released them (a request
        abandoned before it generated: a client gone before its stream began) once their
        deadline has passed: they hold nothing, and counted for ever they would fill the
        target's queue. Call with the lock held."""
        held = self._by_target.get(target, [])
        held[:] = [r for r in held if r.deadline > now - 1.0]
        return held

    def wait(
        self,
        target: str,
        deadline: float,
        *,
        slots: int = 1,
        edf: bool = False,
        preemptive: bool = False,
        external: int = 0,
        external_ms: float = 0.0,
        now: float | None = None,
    ) -> Wait:
        """The predicted wait before a request due at ``deadline`` starts at ``target``.

        Served earliest deadline first (``edf``), a request waits only behind those due before
        it, and those already started unless a ``preemptive`` target lets it take their slot.
        ``external`` requests (another client's, seen in the server's own load report) are
        counted ahead too, ``external_ms`` each.
        """
        now = time.perf_counter() if now is None else now
        slots = max(slots, 1)
        with self._lock:
            held = list(self._live(target, now))
        ahead = [
            r
            for r in held
            if not edf or r.deadline <= deadline or (r.started is not None and not preemptive)
        ]
        count = len(ahead) + max(external, 0)
        if count < slots:
            return Wait(0.0, count, slots, tuple(ahead))
        work = sum(r.remaining_ms(now) for r in ahead) + max(external, 0) * external_ms
        # A slot frees when the earliest of the running requests ends; with every slot busy,
        # the work ahead is shared by the slots.
        ms = work / slots
        if ahead and not external:
            ms = min(ms, max((max(r.deadline for r in ahead) - now) * 1000.0, 0.0))
        return Wait(ms, count, slots, tuple(ahead))


@dataclass(frozen=True)
class TargetQueue:
    """How a target serves its queue, as far as planning is concerned."""

    slots: int = 1
    """Requests it decodes at once."""
    edf: bool = False
    """Whether it serves our requests earliest-deadline-first (llama.cpp's worker does; an
    SGLang server scheduling by priority does, told each deadline as its priority)."""
    preemptive: bool = False
    """Whether a request due earlier takes a running one's slot (SGLang's priority
    preemption): then only those due earlier are ahead."""
    external: int = 0
    """Requests it reports that are not ours (another replica's): counted ahead of us."""
