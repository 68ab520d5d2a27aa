"""One learned per-unit cost: recent ms per unit of some work, anchored to a prior.

A stage's cost per query, per candidate pair or per answer (``CostModel.stage``), a stage's
calls on its threads (``CostModel.quickest_call_ms``) and the door's time alone per route
(``DoorPace``) are each one ``StageCost``: observations weighed by recency (``Samples``), read
at a quantile beside the prior (``Learning.prior_weight_beside``). Thread-safe.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from tracing.budget.observations import (
    REFUSAL_AGE,
    Estimates,
    Learning,
    Ordered,
    Samples,
)


class StageCost:
    """One per-unit stage: recent ms per unit, anchored to a prior."""

    def __init__(
        self, prior_ms: float | None, learning: Learning, clock: Callable[[], float]
    ) -> None:
        self.prior_ms = prior_ms
        self.learning = learning
        self._samples = Samples(learning, clock, recovers=True)
        self._lock = threading.Lock()
        """Held to change or read the samples: a stage's threads teach their calls' times."""
        self._ordered: Estimates[Ordered] = Estimates(learning.refresh_s)
        """The observations in order, as weighed when last read (``Ordered``)."""
        self._rates: Estimates[float] = Estimates(learning.refresh_s)
        """Rates read, by quantile and prior."""
        self._least: Estimates[float] = Estimates(learning.refresh_s)

    def observe(self, elapsed_ms: float, units: float) -> None:
        if units > 0 and elapsed_ms >= 0 and math.isfinite(elapsed_ms):
            with self._lock:
                self._samples.add(units, elapsed_ms / units)
            self._forget_estimates()

    def observe_refusal(self) -> None:
        """Age what was learned (see ``GenerationCost.observe_refusal``), read afresh at once:
        work refused or dropped on these figures must not go on being so for ``refresh_s``."""
        with self._lock:
            self._samples.age(REFUSAL_AGE)
        self._forget_estimates(at_once=True)

    def _forget_estimates(self, *, at_once: bool = False) -> None:
        """What was learned changed: the estimates read before now are stale (``Estimates``),
        or, ``at_once``, dropped."""
        for estimates in (self._ordered, self._rates, self._least):
            if at_once:
                estimates.clear()
            else:
                estimates.changed()

    def _weighted(self) -> Ordered:
        """``(ms per unit, weight)`` of the recent observations, in order. Kept, as every
        estimate is (``Estimates``): each is read at several quantiles, with and without the
        prior."""
        now = self._samples.clock()
        ordered = self._ordered.get(None, now)
        if ordered is None:
            with self._lock:
                ordered = self._samples.ordered()
            self._ordered.put(None, now, ordered)
        return ordered

    def rate(self, quantile: float | None = None, *, prior_ms: float | None = None) -> float:
        """ms per unit at ``quantile`` (the model's own by default), beside ``prior_ms`` if
        given, else the stage's prior; 0 when nothing is known. Kept as ``Estimates`` keeps
        it."""
        q = self.learning.quantile if quantile is None else quantile
        prior = self.prior_ms if prior_ms is None else prior_ms
        now = self._samples.clock()
        rate = self._rates.get((q, prior), now)
        if rate is None:
            rate = self._rate(q, prior)
            self._rates.put((q, prior), now, rate)
        return rate

    def learned(self, quantile: float) -> float | None:
        """ms per unit at ``quantile`` of the observations alone (None before any)."""
        values = self._weighted()
        return values.quantile(quantile) if values else None

    def least(self, quantile: float = 0.05) -> float:
        """ms per unit at a low ``quantile`` of what was observed: the least a unit needs. The
        prior stands instead while the observations weigh less than one fresh one (none yet, or
        aged by drops: ``observe_refusal``), so that work dropped as too late for its time
        cannot go on being dropped on old figures."""
        now = self._samples.clock()
        least = self._least.get(quantile, now)
        if least is None:
            values = self._weighted()
            if values.total < self.learning.prior_weight:
                least = self.prior_ms or 0.0
            else:
                least = values.quantile(quantile)
            self._least.put(quantile, now, least)
        return least

    def _rate(self, quantile: float, prior: float | None) -> float:
        values = self._weighted()
        if prior is None:
            return values.quantile(quantile) if values else 0.0
        beside = (prior, self.learning.prior_weight_beside(values.total, quantile))
        return values.quantile(quantile, beside)

    def mean(self) -> float:
        values = self._weighted()
        pairs = list(zip(values.values, values.weights, strict=True))
        if self.prior_ms is not None:
            pairs.append((self.prior_ms, self.learning.prior_weight_beside(values.total)))
        total = sum(w for _, w in pairs)
        return sum(v * w for v, w in pairs) / total if total else 0.0

    @property
    def observations(self) -> int:
        return self._samples.count
