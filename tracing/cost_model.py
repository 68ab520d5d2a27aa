"""An online cost model: what each stage costs per unit of work, learned from recent runs.

Costs are normalised by the work done: rerank per candidate pair, prefill per prompt token that
was not cached, decode per output token, embed and search per query. Each rate is an
exponentially weighted moving average seeded with a prior, so the first requests after start-up
plan with sensible numbers and later ones with what this machine really does. Thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

#: Priors in ms per unit, measured on the 2-core CPU default (MiniLM, SmolLM2 via llama.cpp).
DEFAULT_PRIORS_MS: Mapping[str, float] = {
    "embed": 15.0,  # per query
    "search": 2.0,  # per query
    "rerank": 4.0,  # per candidate pair
    "prefill": 2.5,  # per uncached prompt token
    "decode": 12.0,  # per output token
    "service": 3000.0,  # per request: prefill + decode, what a queued request makes others wait
}


class CostModel:
    """EWMA of ms per unit for each stage; ``predict`` is rate x units."""

    def __init__(
        self, priors_ms: Mapping[str, float] = DEFAULT_PRIORS_MS, *, alpha: float = 0.2
    ) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must lie in (0, 1], got {alpha}")
        self.alpha = alpha
        self._rates: dict[str, float] = dict(priors_ms)
        self._observations: dict[str, int] = dict.fromkeys(priors_ms, 0)
        self._lock = threading.Lock()

    def observe(self, stage: str, elapsed_ms: float, units: float) -> None:
        """Learn from one run of ``stage`` that did ``units`` of work in ``elapsed_ms``."""
        if units <= 0 or elapsed_ms < 0:
            return
        rate = elapsed_ms / units
        with self._lock:
            previous = self._rates.get(stage)
            self._rates[stage] = (
                rate if previous is None else previous + self.alpha * (rate - previous)
            )
            self._observations[stage] = self._observations.get(stage, 0) + 1

    def seed(self, rates_ms: Mapping[str, float]) -> None:
        """Set rates outright (from a benchmark of this machine, or in tests)."""
        with self._lock:
            self._rates.update(rates_ms)

    def rate(self, stage: str) -> float:
        """Current ms per unit for ``stage`` (0 for a stage never seen and without a prior)."""
        with self._lock:
            return self._rates.get(stage, 0.0)

    def predict(self, stage: str, units: float) -> float:
        return self.rate(stage) * max(units, 0.0)

    def snapshot(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {
                stage: {"ms_per_unit": round(rate, 4), "observations": self._observations[stage]}
                for stage, rate in sorted(self._rates.items())
            }
