"""Observations and how much each counts: the recency weights, the prior's weight, quantiles.

Each estimate of the cost model keeps its recent observations in ``Samples``: an observation
weighs half as much after ``Learning.halflife_requests`` newer ones and after
``Learning.halflife_s`` seconds, and a refusal ages every one of them as if ``REFUSAL_AGE``
requests had come (a refused request teaches nothing). The prior beside them weighs at least
``Learning.prior_weight``, and while observations are few, as many as make
``Learning.prior_observations`` (by default enough that no single one sets the quantile read:
``Learning.prior_weight_beside``).

A machine that was slow (a burst of other load, a compiler beside the server) and is fast again
would otherwise be read as slow for as long as the slow period's observations weigh: at p90,
about 50 requests or minutes. So an estimate of a rate (``Samples(..., recovers=True)``)
forgets a slow period once it has ended: when its newest ``SPEED_UP_RUN`` observations are all
at most ``SPEED_UP_FACTOR`` times the median of the unbroken stretch of slower ones before them,
and that stretch is as far above what came before it (``Samples.slow_period``). The next plans
read what was learned before the period (or, if there was nothing, the fast observations beside
the prior, as a fresh process would). Getting slower needs no such rule:
the high quantile read already follows two slow observations in a row.

This is the one scheme every learned figure of a process follows, the cost model's stages and
targets and the door's pace alike; they differ in their ``Learning``'s figures only. A figure
read as a ratio over all its observations (the door's work per request) keeps them as two
faded sums (``Totals``), weighed as ``Samples`` would weigh them.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")

#: How long an estimate is kept before it is computed afresh, when no observation came.
ESTIMATE_TTL_S = 1.0

LN2 = math.log(2.0)

#: Ranks a refusal ages every observation by: half a half-life of 16 requests.
REFUSAL_AGE = 8.0

#: A speed-up is this many newest observations in a row ...
SPEED_UP_RUN = 3
#: ... each at most this share of the slow period's median before them ...
#: ... the period being the observations over this many times the run's slowest.
SLOW_STRETCH = 1.5
SPEED_UP_FACTOR = 0.5


@dataclass(frozen=True)
class Learning:
    """How fast the model forgets, and how much it trusts its prior."""

    quantile: float = 0.9
    window: int = 64
    """Observations kept per estimate."""
    halflife_requests: float = 16.0
    """An observation weighs half as much after this many newer ones."""
    halflife_s: float = 120.0
    """... and half as much after this many seconds."""
    prior_weight: float = 1.0
    """The prior counts as at least this many fresh observations ..."""
    prior_observations: float | None = None
    """... and as this many less the weight of those seen (None: as many as a quantile read
    needs, ``1 / (1 - quantile) + 1``)."""
    refresh_s: float = 0.0
    """An estimate read less than this many seconds ago stands though observations came since
    (``Estimates``); 0: each observation is in the next reading. Every observation is kept
    either way: this bounds how often a busy process works its estimates out afresh."""

    def __post_init__(self) -> None:
        if not 0.0 < self.quantile < 1.0:
            raise ValueError(f"quantile must lie in (0, 1), got {self.quantile}")
        if self.window < 2 or self.halflife_requests <= 0 or self.halflife_s <= 0:
            raise ValueError("window >= 2 and positive half-lives are required")
        if self.prior_weight <= 0:
            raise ValueError(f"prior_weight must be positive, got {self.prior_weight}")
        if not 0.0 <= self.refresh_s < ESTIMATE_TTL_S:
            raise ValueError(f"refresh_s must lie in [0, {ESTIMATE_TTL_S}), got {self.refresh_s}")

    def prior_weight_beside(self, observed: float, quantile: float | None = None) -> float:
        """... and beside observations weighing ``observed`` in all, as many as make the total
        ``prior_observations``, by default ``1 / (1 - quantile) + 1``: among few observations no
        single one, a cold start or a stall, carries the tail a quantile reads (one in 11 is
        under the 10% above p90), while two that agree already move it."""
        full = self.prior_observations
        if full is None:
            q = self.quantile if quantile is None else quantile
            full = 1.0 / (1.0 - q) + 1.0
        return max(self.prior_weight, full - observed)


class Samples:
    """Recent ``(x, y)`` observations with recency weights.

    An observation's rank is how many newer ones came after it, plus ``REFUSAL_AGE`` for every
    refusal since (``age``): a refused request teaches nothing, so it ages what was learned and
    lets the prior, whose weight is fixed, count for more. With ``recovers``, the ``y`` values
    are rates, and a slow period that has ended is forgotten (``slow_period``)."""

    def __init__(
        self, learning: Learning, clock: Callable[[], float], *, recovers: bool = False
    ) -> None:
        self.learning = learning
        self.clock = clock
        self.recovers = recovers
        self.points: deque[tuple[float, float, float, float]] = deque(maxlen=learning.window)
        self.count = 0
        self.speed_ups = 0
        self._position = 0.0

    def add(self, x: float, y: float) -> tuple[float, float] | None:
        """Keep one observation. When it ends a slow period (``slow_period``), that period's
        observations are forgotten, and its span of clock times is returned."""
        self.points.append((x, y, self.clock(), self._position))
        self._position += 1.0
        self.count += 1
        if not self.recovers:
            return None
        block = self.slow_period()
        if block is None:
            return None
        span = (self.points[block.start][2], self.points[block.stop - 1][2])
        # What came before the period weighs as if the period had not come (its time aside).
        older = [
            (x, y, at, position + len(block))
            for x, y, at, position in list(self.points)[: block.start]
        ]
        newer = list(self.points)[block.stop :]
        self.points.clear()
        self.points.extend(older + newer)
        self.speed_ups += 1
        return span

    def slow_period(self) -> range | None:
        """Where a slow period that has ended lies among the points, or None.

        The newest ``SPEED_UP_RUN`` observations are the run. The period is the unbroken
        stretch of observations over ``SLOW_STRETCH`` times the run's slowest that ends at most
        ``SPEED_UP_RUN - 1`` observations before the run (those between, a machine slowing
        down or speeding up, go with it). It has ended when it holds two observations at least
        (one is a stall, which the tail should keep), its median is at least ``1 /
        SPEED_UP_FACTOR`` times the run's slowest, and as far above the upper quartile of the
        observations before it, if any. So a burst of other load that ends is forgotten
        whatever its length; an engine whose batches make two speeds (a queueing GPU server)
        has slow stretches no slower than its usual, and keeps them."""
        points, run = self.points, SPEED_UP_RUN
        n = len(points)
        if n < run + 2:
            return None
        between = range(max(0, n - 2 * run), n - run)
        newest = points[-1][1]
        if all(points[i][1] <= SLOW_STRETCH * newest for i in between):  # most calls end here
            return None
        slowest_of_run = max(points[-i][1] for i in range(1, run + 1))
        threshold = SLOW_STRETCH * slowest_of_run
        end = next((i for i in reversed(between) if points[i][1] > threshold), None)
        if end is None:
            return None
        start = end
        while start > 0 and points[start - 1][1] > threshold:
            start -= 1
        period = sorted(points[i][1] for i in range(start, end + 1))
        median = period[len(period) // 2]
        if len(period) < 2 or median * SPEED_UP_FACTOR < slowest_of_run:
            return None
        if start > 0:
            before = sorted(points[i][1] for i in range(start))
            if median * SPEED_UP_FACTOR < before[(3 * len(before)) // 4]:
                return None
        return range(start, n - run)

    def drop_between(self, first_at: float, last_at: float) -> None:
        """Forget the observations made from ``first_at`` to ``last_at`` (clock times)."""
        kept = [p for p in self.points if not first_at <= p[2] <= last_at]
        self.points.clear()
        self.points.extend(kept)

    def age(self, ranks: float) -> None:
        self._position += ranks

    def weighted(self) -> list[tuple[float, float, float]]:
        """``(x, y, weight)``, the newest first. A weight is ``0.5 ** (rank / halflife_requests
        + age_s / halflife_s)``, taken as one ``exp`` of a difference from the newest possible
        observation (the planner reads every estimate on every request)."""
        lr, now = self.learning, self.clock()
        by_rank, by_second = LN2 / lr.halflife_requests, LN2 / lr.halflife_s
        newest = (self._position - 1.0) * by_rank + now * by_second
        exp = math.exp
        return [
            (x, y, exp(position * by_rank + at * by_second - newest))
            for x, y, at, position in reversed(self.points)
        ]

    def ordered(self) -> Ordered:
        """The ``y`` values with their weights, in order (``Ordered``)."""
        return Ordered([(y, w) for _, y, w in self.weighted()])


class Totals:
    """Observations ``(x, y)`` kept as two sums, for the ratio of all of them: weighed as
    ``Samples`` weighs its observations, the sums fading as each newer one comes and as time
    passes, so that none need be kept (a burst brings hundreds)."""

    def __init__(self, learning: Learning, clock: Callable[[], float]) -> None:
        self.learning = learning
        self.clock = clock
        self.x = self.y = 0.0
        self.count = 0
        self._at = clock()

    def _faded(self, now: float) -> tuple[float, float]:
        factor = 0.5 ** ((now - self._at) / self.learning.halflife_s)
        return self.x * factor, self.y * factor

    def add(self, x: float, y: float) -> None:
        now = self.clock()
        x_before, y_before = self._faded(now)
        newer = 0.5 ** (1.0 / self.learning.halflife_requests)
        self.x, self.y = x_before * newer + x, y_before * newer + y
        self._at = now
        self.count += 1

    def ratio(self, prior: float) -> float:
        """``y`` per ``x``, with ``prior`` as pseudo-observations (``prior_weight_beside``)."""
        x, y = self._faded(self.clock())
        weight = self.learning.prior_weight_beside(x)
        return (y + weight * prior) / (x + weight)

    def learned(self) -> float | None:
        """``y`` per ``x`` of the observations alone (None before any)."""
        return self.y / self.x if self.x > 0 else None


class Estimates(Generic[T]):
    """Estimates read from observations, by quantile, since planning and admission read each
    several times a request: each kept for ``ESTIMATE_TTL_S``, or, once an observation came
    after it was read (``changed``), until it is ``refresh_s`` old (``Learning.refresh_s``; 0:
    computed afresh at its next reading). ``clear`` (what was learned was replaced) drops them
    all, replacing the mapping, so a reader on another thread finishes with the old one."""

    def __init__(self, refresh_s: float = 0.0) -> None:
        self.refresh_s = refresh_s
        self._kept: dict[Hashable, tuple[float, int, T]] = {}
        self._observations = 0
        """Observations so far (``changed``): what each estimate was read after."""

    def get(self, key: Hashable, now: float) -> T | None:
        """The estimate read with ``key`` (its quantile, or its quantile and prior), if kept."""
        kept = self._kept.get(key)
        if kept is None:
            return None
        read_at, observations, estimate = kept
        age = now - read_at
        if age >= ESTIMATE_TTL_S or (observations != self._observations and age >= self.refresh_s):
            return None
        return estimate

    def put(self, key: Hashable, now: float, estimate: T) -> None:
        self._kept[key] = (now, self._observations, estimate)

    def changed(self) -> None:
        """An observation came: what was read before it is stale."""
        self._observations += 1

    def clear(self) -> None:
        self._kept = {}


class Ordered:
    """``(value, weight)`` pairs in ascending order of value, with their total weight: quantiles
    are read from it in one pass, beside one more pair (a prior) placed without sorting again.
    The cost model reads several quantiles, with and without its prior, of each set of
    observations before the next observation changes it (``weighted_quantile`` would sort it
    every time)."""

    def __init__(self, pairs: list[tuple[float, float]]) -> None:
        ordered = sorted(pairs)
        self.values = [v for v, _ in ordered]
        self.weights = [w for _, w in ordered]
        self.total = sum(self.weights)

    def __len__(self) -> int:
        return len(self.values)

    def quantile(self, q: float, beside: tuple[float, float] | None = None) -> float:
        """The ``q`` quantile of the pairs and ``beside``, as ``weighted_quantile`` of them all
        would read it."""
        if beside is None:
            extra, extra_weight, placed = 0.0, 0.0, True
        else:
            (extra, extra_weight), placed = beside, False
        if not self.values and placed:
            raise ValueError("no values")
        target = q * (self.total + extra_weight) - 1e-12
        acc = 0.0
        for value, weight in zip(self.values, self.weights, strict=True):
            if not placed and (extra, extra_weight) <= (value, weight):
                acc += extra_weight
                placed = True
                if acc >= target:
                    return extra
            acc += weight
            if acc >= target:
                return value
        return extra if not placed else self.values[-1]


def weighted_quantile(values: list[tuple[float, float]], q: float) -> float:
    """The ``q`` quantile of ``(value, weight)`` pairs (the smallest value whose cumulative
    weight reaches ``q`` of the total)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    total = sum(w for _, w in ordered)
    acc = 0.0
    for value, weight in ordered:
        acc += weight
        if acc >= q * total - 1e-12:
            return value
    return ordered[-1][0]
