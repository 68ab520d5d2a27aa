"""Admission by predicted finish: a request is let in when the work ahead of it lets it finish
within its budget, and refused at once (503 ``overloaded``) when it does not.

Decisions are made on the event loop and, under ``ragtime serve``, on the thread that reads
requests ahead of it (``app.frontdoor.read_ahead``): the book's changes hold its lock.

A fixed cap on requests in flight refuses work that fits and admits work that cannot (issue 22):
25 questions at once with 1 s each got 4 answers from a server that answers 25 a second. Here
each admitted request holds a ``Ticket`` until its response ends. A newcomer's finish is
predicted as

    alone(route) + ahead x per_request + generation floor + loop lag

* ``alone(route)``: how long the process's own work (every stage but generation: embed, search,
  screens, assembly, attribution, moderation, the HTTP exchange) takes a request of that route
  from its admission, with no other in its own work beside it (from its admission, as the
  prediction is compared with the time left from now; from its arrival it would count the wait
  before its read too, which the loop's recent lag puts at up to a stall's length). It is the
  lower quartile of recent such requests (a fresh process's first requests, and those that
  miss every cache, are the slow ones). A process's first request alone of a route is not
  learned from: it pays one-time costs (the models' first runs, lazy set-up), 160 ms or more on
  the null backend where the next took about 20, and taken as a request's cost it made a fresh
  server refuse half of a first burst it answers whole (BENCHMARKS.md, "A fresh server's first
  burst");
* ``ahead``: the tickets still in their own work whose deadline is no later than the
  newcomer's (the stage queues serve earliest deadline first); a ticket whose answer is being
  generated is not ahead: the generation queue is the budget session's
  (``BudgetEngine.check_queue_room``, per target);
* ``per_request``: the process's own work per request when requests overlap, learned as
  throughput: the time two or more requests were in their own work, divided by the requests
  that finished meanwhile. Embedding batches, stage threads and the event loop are all in it,
  as they are shared. Both sums fade with time (halved every ``THROUGHPUT_HALF_LIFE_S``), not
  with each finish: a burst's requests leave their batched stages together, and fading the
  burst's time at each of its finishes counted a fifth of it for a hundred of them, so that
  the figure fell burst after burst (9.2, 8.0, 5.0, 3.1, then 1.8 ms a request over 25, 100,
  200 and two 250-question bursts) and the last bursts admitted four times what they could
  answer (BENCHMARKS.md, "The regression fixed");
* the generation floor: the smallest answer's predicted generation at the median (nothing for a
  search);
* the event loop's lag (``tracing.loop_lag``), which the answer's last event waits behind,
  and which the budget session keeps in reserve before it lets an answer begin
  (``generation_reserve_ms``): the recent lag, or the lag the requests in the process will
  make, if larger: one more than those admitted, times the loop's lag per admitted request
  (the 90th percentile of recent measurements taken with ``LAG_LEARN_MIN`` or more admitted:
  ``observe_lag``), once the work per request is learned (``expected_lag_ms``). A burst's
  answers leave their stages together and the loop then runs all their ends: with 50-60
  answers in a process it measured 100-125 ms where it had been a few ms when they were
  admitted, and a fifth of the answers admitted on the lag of then found their budget short
  of that reserve and ended in 504 (BENCHMARKS.md, "The regression fixed").

A newcomer is admitted when that is within its budget's time left, less ``margin_share`` of its
budget (the answer's last bytes still have to reach the client, which no server-side figure
shows). Before anything is learned, what the process's siblings under the same ``ragtime serve``
have learned stands in (``peers``), else ``prior_alone_ms``, and the time alone divided
by the process's share of the cores (the cores over the processes serving beside each other: in
a burst every process is busy). Refusing costs one comparison; the middleware
(``app.frontdoor.gate``) decides before auth and before the stage threads, with the budget read from
the small JSON body.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable

from tracing.budget.door.peers import Learned, Peers, median
from tracing.budget.door.ticket import Refusal, Ticket

#: Requests alone kept per route: few, so that a fresh process's slow first ones soon leave.
ALONE_WINDOW = 16
#: Overlapped finishes before the learned work per request replaces the prior entirely (they
#: are blended before). Its first figures in a process's first burst count the burst's fill,
#: not its pace: one finish after 64 ms of overlap, blended at a quarter, made 30 ms a request
#: of the prior's 19, and a fresh server refused a quarter of a burst it answers whole
#: (BENCHMARKS.md, "Siblings' figures").
PRIOR_WEIGHT = 16
#: Requests alone before the learned time alone replaces the prior entirely (a process's first,
#: which pays one-time costs, is not among them).
ALONE_PRIOR_WEIGHT = 2
#: Overlapped requests' time and finishes fade by half in this many seconds: a few bursts', or
#: a few hundred requests' at a steady rate.
THROUGHPUT_HALF_LIFE_S = 10.0
#: The loop's lag is learned per admitted request from measurements taken with at least this
#: many admitted (a few requests make no lag worth dividing) ...
LAG_LEARN_MIN = 8
#: ... the last this many of them (one every 10 ms while so busy).
LAG_WINDOW = 200


class FinishAdmission:
    """The tickets of one process, and what it has learned of their own work's time."""

    def __init__(
        self,
        *,
        cores: int,
        processes: int = 1,
        peers: Peers | None = None,
        prior_alone_ms: float = 20.0,
        generation_floor_ms: Callable[[str], float] = lambda route: 0.0,
        lag_ms: Callable[[], float] = lambda: 0.0,
        margin_share: float = 0.0,
    ) -> None:
        self.cores = max(cores, 1)
        self.processes = max(processes, 1)
        """Processes serving beside this one, itself included: they share the cores."""
        self.peers = peers
        """This process's siblings' figures (None: it serves alone)."""
        self.prior_alone_ms = prior_alone_ms
        self.generation_floor_ms = generation_floor_ms
        """The smallest answer's generation at the median, by route (0 for a search)."""
        self.lag_ms = lag_ms
        """The event loop's recent lag: the last event of an answer waits behind it."""
        self.margin_share = margin_share
        """The share of each budget kept free of predicted work: the answer's last bytes still
        have to reach the client, and a client that shares the server's cores (or is busy with
        many streams) reads them late, which no server-side figure shows."""
        self._tickets: list[Ticket] = []
        self._alone: dict[str, deque[float]] = {}
        self._first_seen: set[str] = set()
        """Routes whose first request alone has finished (and was not learned from)."""
        self._overlap_s = 0.0
        """Time two or more tickets were in their own work (fading with time) ..."""
        self._finished = 0.0
        """... and the tickets that finished meanwhile (fading alike)."""
        self._overlapped_seen = 0
        """Overlapped finishes ever: how far the learned figure is trusted over the prior."""
        self._first_burst = True
        """The process's first stretch of overlapped work (two or more requests in their own
        work, until fewer are) is not over. Nothing is learned from it: it pays one-time costs,
        as a process's first request alone does. After one 25@1 burst its figure (18-35 ms a
        request, where a process's bursts of 12-100 took 7-8 ms each) made fresh servers refuse
        8-24 of a 100@1 burst; after two, 0-5 (BENCHMARKS.md, "A first burst after a small
        one"). It is not cut short: a burst's requests finish together, and finishes counted
        after a cut would bring none of the burst's time with them."""
        self._lag_ratios: deque[float] = deque(maxlen=LAG_WINDOW)
        """The loop's lag over the requests admitted, of measurements with enough admitted."""
        self._lag_per_request_ms = 0.0
        """Their 90th percentile (0 before any)."""
        self._accounted = time.perf_counter()
        self._unpublished = False
        """Something was learned since the figures were last given to the siblings."""
        self.lock = threading.RLock()
        """Held by every change to the book and every decision (``issue``)."""

    # -- what is predicted ---------------------------------------------------------------------

    def alone_ms(self, route: str) -> float:
        """The own work of a request of ``route`` with nobody beside it: the lower quartile of
        recent ones, blended with the prior (the siblings' figure, else the constant) while few
        are seen."""
        seen = self._alone.get(route, ())
        if len(seen) >= ALONE_PRIOR_WEIGHT:
            return _lower_quartile(seen)
        prior = self._siblings().alone_ms.get(route, self.prior_alone_ms)
        if not seen:
            return prior
        return _blend(_lower_quartile(seen), prior, len(seen), ALONE_PRIOR_WEIGHT)

    def per_request_ms(self) -> float:
        """The process's own work per request when requests overlap (see the module
        docstring), blended with the prior while few are seen: the siblings' figure, else the
        median time alone over the process's share of the cores."""
        seen = self._seen()
        if seen >= PRIOR_WEIGHT:
            return self._overlapped_ms()
        prior = self._siblings().per_request_ms
        if prior is None:
            routes = set(self._alone) | set(self._siblings().alone_ms)
            alone = [self.alone_ms(route) for route in routes] or [self.prior_alone_ms]
            prior = median(alone) * self.processes / self.cores
        if seen <= 0:
            return prior
        return _blend(self._overlapped_ms(), prior, seen)

    def _seen(self) -> int:
        """Overlapped finishes learned from (none while the first burst lasts)."""
        return 0 if self._first_burst else self._overlapped_seen

    def _overlapped_ms(self) -> float:
        """The work per request learned from overlapped finishes (some must be behind it)."""
        return self._overlap_s * 1000.0 / self._finished

    def learned(self) -> Learned:
        """What this process has learned itself, unblended, for its siblings: the time alone
        of each route seen, and the work per request once ``PRIOR_WEIGHT`` overlapped finishes
        are behind it."""
        with self.lock:
            alone = {route: _lower_quartile(seen) for route, seen in self._alone.items() if seen}
            per_request = self._overlapped_ms() if self._seen() >= PRIOR_WEIGHT else None
            return Learned(alone, per_request)

    def _siblings(self) -> Learned:
        return self.peers.siblings() if self.peers is not None else _NOTHING_LEARNED

    def lag_per_request_ms(self) -> float:
        """The loop's lag per admitted request, learned in bursts (0 before any)."""
        return self._lag_per_request_ms

    def expected_lag_ms(self) -> float:
        """The loop's lag a newcomer's answer is predicted to meet: the recent lag, or what
        the admitted requests and the newcomer make at the learned rate, if larger, once the
        work per request is learned (``PRIOR_WEIGHT`` overlapped finishes). Before, the prior
        stands, cautious itself, and the lags of a first burst's arrivals, over the few admitted
        then, would count twice: fresh servers answered 88-98 of a first 100@1 with it, 99-100
        without (BENCHMARKS.md, "The regression fixed")."""
        if self._seen() < PRIOR_WEIGHT:
            return self.lag_ms()
        return max(self.lag_ms(), (len(self._tickets) + 1) * self._lag_per_request_ms)

    def observe_lag(self, lag_ms: float) -> None:
        """One measurement of the loop's lag (``LoopLag.listeners``, on the loop): learned
        from, per admitted request, when ``LAG_LEARN_MIN`` or more are admitted. Without the
        book's lock, which the read-ahead thread's refusals wait on: only the loop touches the
        ratios, and the figure the deciders read is replaced whole."""
        admitted = len(self._tickets)
        if admitted < LAG_LEARN_MIN:
            return
        self._lag_ratios.append(max(lag_ms, 0.0) / admitted)
        ordered = sorted(self._lag_ratios)
        self._lag_per_request_ms = ordered[int(0.9 * (len(ordered) - 1))]

    def ahead_of(self, deadline: float) -> int:
        return sum(1 for t in self._tickets if t.in_own_work and t.deadline <= deadline)

    def predicted_ms(self, route: str, ahead: int) -> float:
        return (
            self.alone_ms(route)
            + ahead * self.per_request_ms()
            + self.generation_floor_ms(route)
            + self.expected_lag_ms()
        )

    def account(self, now: float | None = None) -> int:
        """Add the time since the last call to the overlap, and mark those tickets as sharing
        the process, when two or more tickets were in their own work; call before any ticket
        joins, leaves or changes phase. Returns how many are in their own work."""
        with self.lock:
            now = time.perf_counter() if now is None else now
            self._fade(now - self._accounted)
            own = [t for t in self._tickets if t.in_own_work]
            if len(own) >= 2:
                self._overlap_s += now - self._accounted
                for ticket in own:
                    ticket.shared = True
            elif self._first_burst and self._overlap_s > 0:
                self._forget_first_burst()
            self._accounted = now
            return len(own)

    def _forget_first_burst(self) -> None:
        """The first stretch of overlapped work is over: forget its time and finishes."""
        self._first_burst = False
        self._overlap_s = self._finished = 0.0
        self._overlapped_seen = 0

    def _fade(self, elapsed_s: float) -> None:
        """Fade the overlapped time and finishes alike (their ratio stays), never below one
        finish's weight: a quiet hour does not bring the prior back."""
        if self._finished <= 1.0 or elapsed_s <= 0:
            return
        factor = max(0.5 ** (elapsed_s / THROUGHPUT_HALF_LIFE_S), 1.0 / self._finished)
        self._overlap_s *= factor
        self._finished *= factor

    # -- admission -----------------------------------------------------------------------------

    def issue(
        self, route: str, *, arrived: float, budget_ms: float, now: float | None = None
    ) -> Ticket | Refusal:
        """A ticket when the request is predicted to finish within ``budget_ms`` of
        ``arrived``, else a ``Refusal``. With nobody ahead it is always admitted: whether its
        budget can fit at all is the budget session's to say (504), with fresher figures."""
        with self.lock:
            now = time.perf_counter() if now is None else now
            deadline = arrived + budget_ms / 1000.0
            ahead = self.ahead_of(deadline)
            remaining_ms = (deadline - now) * 1000.0
            if ahead:
                predicted = self.predicted_ms(route, ahead)
                if predicted > remaining_ms - self.margin_share * budget_ms:
                    wait_s = ahead * self.per_request_ms() / 1000.0
                    return Refusal(predicted, remaining_ms, ahead, max(math.ceil(wait_s), 1))
            self.account(now)
            ticket = Ticket(route, arrived, deadline, ahead, admitted_at=now, _book=self)
            self._tickets.append(ticket)
            return ticket

    def finish(self, ticket: Ticket, *, learn: bool = True, now: float | None = None) -> None:
        """``ticket``'s response ended (``Ticket.finish``), ``now`` or at this moment."""
        with self.lock:
            if ticket not in self._tickets:
                return
            ticket.generation_ended()
            now = time.perf_counter() if now is None else now
            overlapped = self.account(now) >= 2
            self._tickets.remove(ticket)
            if not learn:
                return
            if overlapped:
                self._finished += 1.0
                self._overlapped_seen += 1
            learned_alone = not ticket.shared and self._learn_alone(ticket, now)
            self._unpublished = self._unpublished or overlapped or learned_alone
            self._share(young=learned_alone and len(self._alone[ticket.route]) < ALONE_WINDOW)

    def _share(self, *, young: bool) -> None:
        """Give the siblings what was learned: at most every ``PUBLISH_S``, and at once when
        a route's first times alone were learned with no other request in the process (a
        client's first questions, one after another: a sibling's first burst may come next)."""
        peers = self.peers
        if peers is None or not self._unpublished:
            return
        if (young and not self._tickets) or peers.due():
            peers.publish(self.learned())
            self._unpublished = False

    def _learn_alone(self, ticket: Ticket, now: float) -> bool:
        """Learn the time alone from ``ticket``, which had nobody beside it; not from a
        process's first request of its route. Whether it was learned."""
        if ticket.route not in self._first_seen:
            self._first_seen.add(ticket.route)
            return False
        own_ms = ((now - ticket.admitted_at) - ticket.generation_s) * 1000.0
        self._alone.setdefault(ticket.route, deque(maxlen=ALONE_WINDOW)).append(own_ms)
        return True

    @property
    def admitted(self) -> int:
        return len(self._tickets)

    def snapshot(self) -> dict[str, object]:
        """The figures admission decides with (``GET /v1/budget/model``)."""
        with self.lock:
            return {
                "admitted": self.admitted,
                "in_own_work": sum(1 for t in self._tickets if t.in_own_work),
                "alone_ms": {route: round(self.alone_ms(route), 2) for route in self._alone},
                "per_request_ms": round(self.per_request_ms(), 3),
                "overlapped_finishes": self._overlapped_seen,
                "first_burst": self._first_burst,
                "lag_per_request_ms": round(self._lag_per_request_ms, 3),
                "cores": self.cores,
                "processes": self.processes,
                "pid": os.getpid(),
                "learned": self.learned().as_dict(),
                "siblings": self._siblings().as_dict(),
            }


_NOTHING_LEARNED = Learned()


def _lower_quartile(values: Iterable[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 4]


def _blend(learned: float, prior: float, seen: float, full: int = PRIOR_WEIGHT) -> float:
    """``learned`` from ``seen`` observations, weighed against ``prior`` until ``full`` of them
    are seen."""
    weight = min(seen, full) / full
    return weight * learned + (1 - weight) * prior
