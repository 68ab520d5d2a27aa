"""Admission by predicted finish: a request is let in when the work ahead of it lets it finish
within its budget, and refused at once (503 ``overloaded``) when it does not.

Decisions are made on the event loop and, under ``ragtime serve``, on the thread that reads
requests ahead of it (``app.frontdoor.read_ahead``): the book's changes hold its lock.

A fixed cap on requests in flight refuses work that fits and admits work that cannot (issue 22):
25 questions at once with 1 s each got 4 answers from a server that answers 25 a second. Here
each admitted request holds a ``Ticket`` until its response ends. A newcomer's finish is
predicted as

    alone(route) + ahead x per_request + generation floor + loop lag

The learned figures are the cost model's (``CostModel.door``, a ``door.pace.DoorPace``, which the
book is given), under its one prior and fading scheme; the book keeps the tickets and says what
each teaches.

* ``alone(route)``: how long the process's own work (every stage but generation: embed, search,
  screens, assembly, attribution, moderation, the HTTP exchange) takes a request of that route
  from its admission, with no other in its own work beside it (from its admission, as the
  prediction is compared with the time left from now; from its arrival it would count the wait
  before its read too, which the loop's recent lag puts at up to a stall's length). It is the
  lower quartile of recent such requests (a fresh process's first requests, and those that
  miss every cache, are the slow ones). A process's first request alone of a route is not
  learned from: it pays one-time costs (the models' first runs, lazy set-up), 160 ms or more on
  the null backend where the next took about 20, and taken as a request's cost it made a fresh
  server refuse half of a first burst it answers whole (docs/studies/front-door.md, "A fresh
  server's first burst");
* ``ahead``: the tickets still in their own work whose deadline is no later than the
  newcomer's (the stage queues serve earliest deadline first); a ticket whose answer is being
  generated is not ahead: the generation queue is the budget session's
  (``BudgetEngine.check_queue_room``, per target);
* ``per_request``: the process's own work per request when requests overlap, learned as
  throughput: the time two or more requests were in their own work, divided by the requests
  that finished meanwhile. Embedding batches, stage threads and the event loop are all in it,
  as they are shared. It fades with time, not with each finish (``door.pace``);
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
  of that reserve and ended in 504 (docs/studies/bursts-and-admission.md, "The regression fixed").

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
from collections.abc import Callable

from tracing.budget.door.pace import PRIOR_WEIGHT, DoorPace
from tracing.budget.door.peers import Learned, Peers, median
from tracing.budget.door.ticket import Refusal, Ticket

#: Times alone a route's figure is shared with the siblings at once (then at most every
#: ``Peers``' publishing interval): a client's first questions, one after another.
YOUNG_ALONE = 16
#: The loop's lag is learned per admitted request from measurements taken with at least this
#: many admitted (a few requests make no lag worth dividing).
LAG_LEARN_MIN = 8


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
        pace: DoorPace,
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
        self.pace = pace
        """What the door learns, kept in the process's cost model (``CostModel.door``)."""
        self._tickets: list[Ticket] = []
        self._first_seen: set[str] = set()
        """Routes whose first request alone has finished (and was not learned from)."""
        self._overlap_s = 0.0
        """Time two or more tickets were in their own work since the last finish it taught."""
        self._overlapped = False
        """Two or more tickets have been in their own work at once."""
        self._first_burst = True
        """The process's first stretch of overlapped work (two or more requests in their own
        work, until fewer are) is not over. Nothing is learned from it: it pays one-time costs,
        as a process's first request alone does. After one 25@1 burst its figure (18-35 ms a
        request, where a process's bursts of 12-100 took 7-8 ms each) made fresh servers refuse
        8-24 of a 100@1 burst; after two, 0-5 (docs/studies/bursts-and-admission.md, "A first burst
        after a small one"). It is not cut short: a burst's requests finish together, and finishes
        counted after a cut would bring none of the burst's time with them."""
        self._accounted = time.perf_counter()
        self._unpublished = False
        """Something was learned since the figures were last given to the siblings."""
        self.lock = threading.RLock()
        """Held by every change to the book and every decision (``issue``)."""

    # -- what is predicted ---------------------------------------------------------------------

    def alone_ms(self, route: str) -> float:
        """The own work of a request of ``route`` with nobody beside it: the lower quartile of
        recent ones, beside the prior (the siblings' figure, else the constant)."""
        prior = self._siblings().alone_ms.get(route, self.prior_alone_ms)
        return self.pace.alone_ms(route, prior)

    def per_request_ms(self) -> float:
        """The process's own work per request when requests overlap (see the module
        docstring), beside the prior: the siblings' figure, else the median time alone over
        the process's share of the cores."""
        prior = self._siblings().per_request_ms
        if prior is None:
            routes = set(self.pace.alone_routes()) | set(self._siblings().alone_ms)
            alone = [self.alone_ms(route) for route in routes] or [self.prior_alone_ms]
            prior = median(alone) * self.processes / self.cores
        return self.pace.per_request_ms(prior)

    def learned(self) -> Learned:
        """What this process has learned itself, without the prior, for its siblings: the time
        alone of each route seen, and the work per request once ``PRIOR_WEIGHT`` overlapped
        finishes are behind it."""
        door = self.pace
        alone = {route: door.learned_alone_ms(route) for route in door.alone_routes()}
        return Learned(
            {route: ms for route, ms in alone.items() if ms is not None},
            door.learned_per_request_ms(),
        )

    def _siblings(self) -> Learned:
        return self.peers.siblings() if self.peers is not None else _NOTHING_LEARNED

    def lag_per_request_ms(self) -> float:
        """The loop's lag per admitted request, learned in bursts (0 before any)."""
        return self.pace.lag_per_request_ms()

    def expected_lag_ms(self) -> float:
        """The loop's lag a newcomer's answer is predicted to meet: the recent lag, or what
        the admitted requests and the newcomer make at the learned rate, if larger, once the
        work per request is learned (``PRIOR_WEIGHT`` overlapped finishes). Before, the prior
        stands, cautious itself, and the lags of a first burst's arrivals, over the few admitted
        then, would count twice: fresh servers answered 88-98 of a first 100@1 with it, 99-100
        without (docs/studies/bursts-and-admission.md, "The regression fixed")."""
        if self.pace.overlapped_finishes < PRIOR_WEIGHT:
            return self.lag_ms()
        return max(self.lag_ms(), (len(self._tickets) + 1) * self.lag_per_request_ms())

    def observe_lag(self, lag_ms: float) -> None:
        """One measurement of the loop's lag (``LoopLag.listeners``, on the loop): learned
        from, per admitted request, when ``LAG_LEARN_MIN`` or more are admitted. Without the
        book's lock, which the read-ahead thread's refusals wait on: the cost model holds its
        own."""
        admitted = len(self._tickets)
        if admitted >= LAG_LEARN_MIN:
            self.pace.observe_lag_per_request(max(lag_ms, 0.0) / admitted)

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
            own = [t for t in self._tickets if t.in_own_work]
            if len(own) >= 2:
                self._overlap_s += now - self._accounted
                self._overlapped = True
                for ticket in own:
                    ticket.shared = True
            elif self._first_burst and self._overlapped:
                # The first stretch of overlapped work is over: its time taught nothing.
                self._first_burst = False
                self._overlap_s = 0.0
            self._accounted = now
            return len(own)

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
                return  # its share of the overlap goes with the next finish that teaches
            taught = overlapped and not self._first_burst
            if taught:
                self.pace.observe_overlap(self._overlap_s)
            if overlapped:
                self._overlap_s = 0.0
            learned_alone = not ticket.shared and self._learn_alone(ticket, now)
            self._unpublished = self._unpublished or taught or learned_alone
            young = learned_alone and self.pace.alone_seen(ticket.route) < YOUNG_ALONE
            self._share(young=young)

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
        self.pace.observe_alone(ticket.route, own_ms)
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
                "alone_ms": {
                    route: round(self.alone_ms(route), 2) for route in self.pace.alone_routes()
                },
                "per_request_ms": round(self.per_request_ms(), 3),
                "overlapped_finishes": self.pace.overlapped_finishes,
                "first_burst": self._first_burst,
                "lag_per_request_ms": round(self.lag_per_request_ms(), 3),
                "cores": self.cores,
                "processes": self.processes,
                "pid": os.getpid(),
                "learned": self.learned().as_dict(),
                "siblings": self._siblings().as_dict(),
            }


_NOTHING_LEARNED = Learned()
