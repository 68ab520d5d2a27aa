"""What the door has learned of a request's own work, kept in the cost model (``CostModel.door``).

Admission by predicted finish (``door.book``) predicts a newcomer's finish from three learned
figures. They follow the cost model's one scheme (``observations``: recency weights by rank and
by age, the prior as pseudo-observations); only their ``Learning`` differs, for reasons of
their own:

* **time alone**, per route: the own work of a request with nobody beside it, read at its lower
  quartile (a fresh process's first requests, and those that miss every cache, are the slow
  ones), beside the prior the book gives (its siblings' figure, else a constant). A ``StageCost``
  with the model's learning, as a stage's is.
* **work per request** when requests overlap: overlapped time over the requests that finished
  meanwhile, a ratio over all of them (``Totals``). It fades with time only
  (``PACE_LEARNING``): a burst's requests leave their batched stages together, and fading the
  burst's time at each of its finishes counted a fifth of it for a hundred of them, so that the
  figure fell burst after burst (9.2, 8.0, 5.0, 3.1, then 1.8 ms a request over 25, 100, 200
  and two 250-question bursts) and the last bursts admitted four times what they could answer
  (docs/studies/bursts-and-admission.md, "The regression fixed"). The prior counts as
  ``PRIOR_WEIGHT`` finishes less those seen: a process's first figures in a burst count the burst's
  fill, not its pace (one finish after 64 ms of overlap, blended at a quarter, made 30 ms a request
  of the prior's 19, and a fresh server refused a quarter of a burst it answers whole:
  docs/studies/bursts-and-admission.md, "Siblings' figures"). With no finish for a while the prior
  returns, as every learned figure's does.
* **the loop's lag per admitted request**, measured with enough admitted: read at its 90th
  percentile, no prior (0 before any), over many recent measurements (``LAG_LEARNING``: one
  comes every 10 ms while the loop is busy).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from tracing.budget.observations import Learning, Totals
from tracing.budget.stage_cost import StageCost

#: Overlapped finishes the prior counts as, less those seen.
PRIOR_WEIGHT = 16
#: Overlapped time and finishes fade by half in this many seconds: a few bursts', or a few
#: hundred requests' at a steady rate.
THROUGHPUT_HALF_LIFE_S = 10.0
#: The lag measurements kept, and the rank at which one weighs half (one every 10 ms while
#: busy: a few seconds of them).
LAG_WINDOW = 200
#: The quantile the time alone is read at: its lower quartile.
ALONE_QUANTILE = 0.25

PACE_LEARNING = Learning(
    halflife_requests=math.inf,
    halflife_s=THROUGHPUT_HALF_LIFE_S,
    prior_observations=PRIOR_WEIGHT,
)
LAG_LEARNING = Learning(quantile=0.9, window=LAG_WINDOW, halflife_requests=LAG_WINDOW)


class DoorPace:
    """The door's learned figures. Thread-safe for reading; the book teaches them under its
    lock, the loop's lag from the loop."""

    def __init__(self, learning: Learning, clock: Callable[[], float]) -> None:
        # Read afresh after each observation, whatever the planner's estimates do: a finish
        # teaches a time alone and publishes it to the siblings at once (``Peers``).
        self.learning = dataclasses.replace(learning, refresh_s=0.0)
        self._clock = clock
        self.forget()

    def forget(self) -> None:
        """Start over from the priors (``CostModel.seed``)."""
        self._alone: dict[str, StageCost] = {}
        self._overlap = Totals(PACE_LEARNING, self._clock)
        """Overlapped seconds (y) over the finishes they led to (x)."""
        self._lag = StageCost(None, LAG_LEARNING, self._clock)

    # -- time alone ------------------------------------------------------------------------

    def _alone_cost(self, route: str) -> StageCost:
        cost = self._alone.get(route)
        if cost is None:
            cost = self._alone.setdefault(route, StageCost(None, self.learning, self._clock))
        return cost

    def observe_alone(self, route: str, own_ms: float) -> None:
        self._alone_cost(route).observe(own_ms, 1.0)

    def alone_ms(self, route: str, prior_ms: float) -> float:
        """The time alone of ``route`` at its lower quartile, beside ``prior_ms``."""
        return self._alone_cost(route).rate(ALONE_QUANTILE, prior_ms=prior_ms)

    def alone_seen(self, route: str) -> int:
        """Times alone of ``route`` seen."""
        cost = self._alone.get(route)
        return cost.observations if cost is not None else 0

    def alone_routes(self) -> list[str]:
        """The routes whose time alone has been seen."""
        return [route for route, cost in list(self._alone.items()) if cost.observations]

    def learned_alone_ms(self, route: str) -> float | None:
        """The time alone of ``route`` as seen, without the prior (None before any)."""
        cost = self._alone.get(route)
        return cost.learned(ALONE_QUANTILE) if cost is not None else None

    # -- work per request when requests overlap --------------------------------------------

    def observe_overlap(self, seconds: float, finishes: float = 1.0) -> None:
        """``finishes`` requests finished after ``seconds`` more of overlapped work."""
        self._overlap.add(finishes, max(seconds, 0.0))

    def per_request_ms(self, prior_ms: float) -> float:
        return self._overlap.ratio(prior_ms / 1000.0) * 1000.0

    @property
    def overlapped_finishes(self) -> int:
        return self._overlap.count

    def learned_per_request_ms(self) -> float | None:
        """The work per request as seen, without the prior, once it outweighs it."""
        learned = self._overlap.learned()
        if learned is None or self._overlap.count < PRIOR_WEIGHT:
            return None
        return learned * 1000.0

    # -- the loop's lag per admitted request -----------------------------------------------

    def observe_lag_per_request(self, ms: float) -> None:
        self._lag.observe(max(ms, 0.0), 1.0)

    def lag_per_request_ms(self) -> float:
        """Its 90th percentile (0 before any)."""
        return self._lag.rate()
