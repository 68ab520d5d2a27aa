"""The cost model: what each stage will cost, learned online, predicted at a chosen quantile.

Two shapes of cost:

* **Per unit** (embed and search per query, rerank per candidate pair, answer moderation per
  answer): ``StageCost`` keeps the recent per-unit times and predicts ``quantile(rate) * units``.
* **Generation**, one ``GenerationCost`` per serving target (``generation_cost``): a fixed cost
  plus a cost per uncached prompt token to the first token, then a cost per output token.

Every estimate is anchored to a **prior**: the figures measured on our CPU for llama.cpp, or a
target's calibration probe (``calibrate``). The prior enters as pseudo-observations, weighing
at least ``prior_weight`` and enough to outweigh any one of few observations (a cold start, a
stall) at the quantile read, while real observations lose weight with each newer one
(``halflife_requests``) and with age (``halflife_s``), and with each request refused on predicted
cost (a refusal teaches nothing, so it ages what was learned). So a burst of cache hits, a stall
or a slow period fades within a bounded number of requests, refused or served, and with time
when none come at all: the model cannot lock itself out.

Predictions are made at a quantile (p90 by default) of what was observed: the line's prediction
plus the quantile of the observations' distance above it, per-unit rates at their quantile.

It is the one learned-cost model of a process: what else decides on learned times reads them
here, under the same prior and fading:

* **the least** a piece of work needs (``LEAST_QUANTILE`` of what was observed): a stage's call
  on its threads (``quickest_call_ms``, taught by ``observe_call``; its prior is nothing) and a
  target's first token (``least_first_token_ms``), which decide whether queued work that
  reached its turn can still finish before its deadline; a drop of such work teaches nothing,
  so it ages what was learned (``observe_drop``), as a refusal does, and the prior returns;
* **a stage's median rate** (``rate(stage, 0.5)``): rerank's time per pair, which sizes each
  round's batches before the round has measured its own;
* **the door's pace** (``door``: ``door.pace.DoorPace``): a request's own work alone and when
  requests overlap, and the loop's lag per admitted request, which admission predicts a
  newcomer's finish with.

Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from tracing.budget.door.pace import DoorPace
from tracing.budget.generation_cost import (
    CPU_GENERATION_PRIOR,
    GenerationCost,
    GenerationEstimate,
    GenerationPrior,
)
from tracing.budget.observations import (
    Learning,
    weighted_quantile,
)
from tracing.budget.stage_cost import StageCost
from tracing.budget.stage_names import StageName

#: The quantile read as the least a piece of work needs: low, so that work that could still make
#: its deadline is rarely dropped, yet above the fastest outlier (a call that found everything
#: cached).
LEAST_QUANTILE = 0.05

__all__ = [
    "CPU_GENERATION_PRIOR",
    "CPU_STAGE_PRIORS_MS",
    "LEAST_QUANTILE",
    "CostModel",
    "GenerationCost",
    "GenerationEstimate",
    "GenerationPrior",
    "Learning",
    "StageCost",
    "weighted_quantile",
]


#: Priors in ms per unit, measured on our 2-core CPU (MiniLM, SmolLM2-135M via llama.cpp).
CPU_STAGE_PRIORS_MS: Mapping[str, float] = {
    StageName.EMBED: 15.0,  # per query
    StageName.SEARCH: 2.0,  # per query
    StageName.KEYWORD: 2.0,  # per query (BM25: priced before it runs, keyword_side)
    StageName.RERANK: 4.0,  # per candidate pair
    StageName.MODERATE_ANSWER: 5.0,  # per answer
    # per answer attributed: its sentences and its passages' (MiniLM, ONNX)
    StageName.ATTRIBUTE: 60.0,
}


class CostModel:
    """Every stage's cost, and one generation cost per serving target."""

    def __init__(
        self,
        stage_priors_ms: Mapping[str, float] = CPU_STAGE_PRIORS_MS,
        generation_prior: GenerationPrior = CPU_GENERATION_PRIOR,
        *,
        learning: Learning | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.learning = learning or Learning()
        self.generation_prior = generation_prior
        self._clock = clock
        self._stage_priors = dict(stage_priors_ms)
        self._stages: dict[str, StageCost] = {}
        self._calls: dict[str, StageCost] = {}
        self._targets: dict[str, GenerationCost] = {}
        self._lock = threading.Lock()
        self.door = DoorPace(self.learning, clock)
        """What admission at the door has learned of a request's own work."""

    # -- per-unit stages ------------------------------------------------------------------

    def stage(self, name: str) -> StageCost:
        with self._lock:
            cost = self._stages.get(name)
            if cost is None:
                cost = StageCost(self._stage_priors.get(name), self.learning, self._clock)
                self._stages[name] = cost
            return cost

    def observe(self, stage: str, elapsed_ms: float, units: float) -> None:
        """Learn from one run of ``stage`` that did ``units`` of work in ``elapsed_ms``."""
        self.stage(stage).observe(elapsed_ms, units)

    def rate(self, stage: str, quantile: float | None = None) -> float:
        """ms per unit of ``stage`` at ``quantile``, the model's own by default (0 when nothing
        is known)."""
        return self.stage(stage).rate(quantile)

    # -- a stage's calls on its threads ---------------------------------------------------

    def _call(self, stage: str) -> StageCost:
        with self._lock:
            cost = self._calls.get(stage)
            if cost is None:
                # The prior is nothing: before any call, or after drops have aged what was
                # seen, a call is never judged too late for the time it has.
                cost = self._calls[stage] = StageCost(None, self.learning, self._clock)
            return cost

    def observe_call(self, stage: str, elapsed_ms: float) -> None:
        """One call of ``stage``'s work on its threads took ``elapsed_ms``, its queue aside."""
        self._call(stage).observe(elapsed_ms, 1.0)

    def quickest_call_ms(self, stage: str) -> float:
        """The least one call of ``stage`` needs (``LEAST_QUANTILE`` of recent calls)."""
        return self._call(stage).least(LEAST_QUANTILE)

    def observe_call_drop(self, stage: str) -> None:
        """A call of ``stage`` was dropped at its turn, too late to finish: it ages what was
        learned, so that a slow period cannot make every later call look too late."""
        self._call(stage).observe_refusal()

    def predict(self, stage: str, units: float) -> float:
        return self.rate(stage) * max(units, 0.0)

    # -- generation -----------------------------------------------------------------------

    def generation(self, target: str) -> GenerationCost:
        """The cost of ``target``, started from the default prior when it is new."""
        with self._lock:
            cost = self._targets.get(target)
            if cost is None:
                cost = GenerationCost(self.generation_prior, self.learning, self._clock)
                self._targets[target] = cost
            return cost

    def least_first_token_ms(self, target: str, prompt_tokens: int) -> float:
        """The least time ``target`` needs to a prompt of ``prompt_tokens``' first token, its
        queue aside (``LEAST_QUANTILE``)."""
        return self.generation(target).least_first_token_ms(prompt_tokens, LEAST_QUANTILE)

    def observe_drop(self, target: str) -> None:
        """``target`` dropped a request at its turn, too late for its first token: as a
        refusal, it ages what was learned."""
        self.generation(target).observe_refusal()

    def calibrate(self, target: str, prior: GenerationPrior) -> None:
        """Anchor ``target`` to a measured prior (its calibration probe)."""
        self.generation(target).recalibrate(prior)

    def observe_refusal(self, target: str, stages: tuple[str, ...] = ()) -> None:
        """A request to ``target`` was refused on predicted cost (before ``stages`` ran)."""
        self.generation(target).observe_refusal()
        for name in stages:
            self.stage(name).observe_refusal()

    def seed(
        self,
        stage_rates_ms: Mapping[str, float] | None = None,
        generation: GenerationPrior | None = None,
    ) -> None:
        """Start over from these priors: every observation is forgotten (tests, benches, or an
        operator who knows the model was wrong)."""
        with self._lock:
            if stage_rates_ms is not None:
                self._stage_priors.update(stage_rates_ms)
            if generation is not None:
                self.generation_prior = generation
            self._stages.clear()
            self._calls.clear()
            self._targets.clear()
            self.door.forget()

    def targets(self) -> list[str]:
        with self._lock:
            return sorted(self._targets)

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            stages = dict(self._stages)
            targets = dict(self._targets)
            calls = dict(self._calls)
        for name in self._stage_priors:
            stages.setdefault(name, self.stage(name))
        return {
            "quantile": self.learning.quantile,
            "stages": {
                name: {
                    "ms_per_unit": round(cost.rate(), 4),
                    "ms_per_unit_mean": round(cost.mean(), 4),
                    "observations": cost.observations,
                    "prior_ms": cost.prior_ms,
                }
                for name, cost in sorted(stages.items())
            },
            "generation": {name: cost.snapshot() for name, cost in sorted(targets.items())},
            "quickest_call_ms": {
                name: round(cost.least(LEAST_QUANTILE), 4) for name, cost in sorted(calls.items())
            },
        }
