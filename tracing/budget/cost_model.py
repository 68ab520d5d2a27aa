"""The cost model: what each stage will cost, learned online, predicted at a chosen quantile.

Two shapes of cost:

* **Per unit** (embed and search per query, rerank per candidate pair, answer moderation per
  answer): ``StageCost`` keeps the recent per-unit times and predicts ``quantile(rate) * units``.
* **Generation**, one ``GenerationCost`` per serving target (a backend endpoint and its model):
  time to first token = ``fixed + prefill * uncached prompt tokens`` (the queue wait aside), then
  ``decode`` per further output token. The two TTFT terms are a weighted least-squares line
  through recent (uncached tokens, TTFT) points, so a fully cached prompt is a point near
  ``x = 0`` that informs the fixed cost and leaves the per-token slope alone: cache hits cannot
  poison the prefill rate, as they did when TTFT was divided by ``max(uncached, 1)``.

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
Thread-safe.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tracing.budget.stage_names import StageName

#: Priors in ms per unit, measured on our 2-core CPU (MiniLM, SmolLM2-135M via llama.cpp).
CPU_STAGE_PRIORS_MS: Mapping[str, float] = {
    StageName.EMBED: 15.0,  # per query
    StageName.SEARCH: 2.0,  # per query
    StageName.RERANK: 4.0,  # per candidate pair
    StageName.MODERATE_ANSWER: 5.0,  # per answer
    # per answer attributed: its sentences and its passages' (MiniLM, ONNX)
    StageName.ATTRIBUTE: 60.0,
}


@dataclass(frozen=True)
class GenerationPrior:
    """A target's costs before (or beside) what its requests show."""

    fixed_ms: float
    """Time to first token of an empty prompt: scheduling, one forward pass, the first hop."""
    prefill_ms_per_token: float
    decode_ms_per_token: float
    source: str = "prior"
    """Where the figures come from: ``prior`` (our CPU's measurement) or ``calibration``."""


#: Ranks a refusal ages every observation by: half a half-life of 16 requests.
REFUSAL_AGE = 8.0

#: SmolLM2-135M through llama.cpp on our 2 cores.
CPU_GENERATION_PRIOR = GenerationPrior(
    fixed_ms=60.0, prefill_ms_per_token=2.5, decode_ms_per_token=12.0, source="prior"
)


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

    def __post_init__(self) -> None:
        if not 0.0 < self.quantile < 1.0:
            raise ValueError(f"quantile must lie in (0, 1), got {self.quantile}")
        if self.window < 2 or self.halflife_requests <= 0 or self.halflife_s <= 0:
            raise ValueError("window >= 2 and positive half-lives are required")
        if self.prior_weight <= 0:
            raise ValueError(f"prior_weight must be positive, got {self.prior_weight}")

    def prior_weight_beside(self, observed: float, quantile: float | None = None) -> float:
        """... and beside observations weighing ``observed`` in all, as many as make the total
        ``1 / (1 - quantile) + 1``: among few observations no single one, a cold start or a
        stall, carries the tail a quantile reads (one in 11 is under the 10% above p90), while
        two that agree already move it."""
        q = self.quantile if quantile is None else quantile
        return max(self.prior_weight, 1.0 / (1.0 - q) + 1.0 - observed)


class _Samples:
    """Recent ``(x, y)`` observations with recency weights.

    An observation's rank is how many newer ones came after it, plus ``REFUSAL_AGE`` for every
    refusal since (``age``): a refused request teaches nothing, so it ages what was learned and
    lets the prior, whose weight is fixed, count for more."""

    def __init__(self, learning: Learning, clock: Callable[[], float]) -> None:
        self.learning = learning
        self.clock = clock
        self.points: deque[tuple[float, float, float, float]] = deque(maxlen=learning.window)
        self.count = 0
        self._position = 0.0

    def add(self, x: float, y: float) -> None:
        self.points.append((x, y, self.clock(), self._position))
        self._position += 1.0
        self.count += 1

    def age(self, ranks: float) -> None:
        self._position += ranks

    def weighted(self) -> list[tuple[float, float, float]]:
        """``(x, y, weight)``, the newest first."""
        lr, now = self.learning, self.clock()
        out = []
        for x, y, at, position in reversed(self.points):
            rank = self._position - position - 1.0
            weight = 0.5 ** (rank / lr.halflife_requests) * 0.5 ** ((now - at) / lr.halflife_s)
            out.append((x, y, weight))
        return out


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


class StageCost:
    """One per-unit stage: recent ms per unit, anchored to a prior."""

    def __init__(
        self, prior_ms: float | None, learning: Learning, clock: Callable[[], float]
    ) -> None:
        self.prior_ms = prior_ms
        self.learning = learning
        self._samples = _Samples(learning, clock)
        self._cached: tuple[float, float] | None = None

    def observe(self, elapsed_ms: float, units: float) -> None:
        if units > 0 and elapsed_ms >= 0 and math.isfinite(elapsed_ms):
            self._samples.add(units, elapsed_ms / units)
            self._cached = None

    def observe_refusal(self) -> None:
        """Age what was learned (see ``GenerationCost.observe_refusal``)."""
        self._samples.age(REFUSAL_AGE)
        self._cached = None

    def rate(self, quantile: float | None = None) -> float:
        """ms per unit at ``quantile`` (the model's own by default); 0 when nothing is known."""
        if quantile is None:
            now = self._samples.clock()
            cached = self._cached
            if cached is not None and now - cached[0] < GenerationCost.ESTIMATE_TTL_S:
                return cached[1]
            rate = self._rate(self.learning.quantile)
            self._cached = (now, rate)
            return rate
        return self._rate(quantile)

    def _rate(self, quantile: float) -> float:
        values = self._with_prior(quantile)
        if not values:
            return 0.0
        return weighted_quantile(values, quantile)

    def mean(self) -> float:
        values = self._with_prior(None)
        total = sum(w for _, w in values)
        return sum(v * w for v, w in values) / total if total else 0.0

    def _with_prior(self, quantile: float | None) -> list[tuple[float, float]]:
        values = [(y, w) for _, y, w in self._samples.weighted()]
        if self.prior_ms is not None:
            observed = sum(w for _, w in values)
            values.append((self.prior_ms, self.learning.prior_weight_beside(observed, quantile)))
        return values

    @property
    def observations(self) -> int:
        return self._samples.count


@dataclass(frozen=True)
class GenerationEstimate:
    """A target's fitted costs at one quantile: plain arithmetic for the planner."""

    fixed_ms: float
    prefill_ms_per_token: float
    ttft_margin_ms: float
    """The quantile of observed minus fitted TTFT (at least 0): how far above the line the
    quantile lies. Additive: a ratio would blow up near the origin, where cache hits sit."""
    decode_ms_per_token: float
    cached_prefix_tokens: float = 0.0
    """Prompt tokens a new request can count on finding cached (the shared system prompt and
    template): a low quantile of what recent requests found."""

    def prompt_ttft_ms(self, prompt_tokens: float) -> float:
        """TTFT of a prompt of ``prompt_tokens``, less the prefix it can count on finding cached."""
        return self.ttft_ms(max(prompt_tokens - self.cached_prefix_tokens, 1.0))

    def ttft_ms(self, uncached_tokens: float) -> float:
        fitted = self.fixed_ms + self.prefill_ms_per_token * max(uncached_tokens, 0.0)
        return fitted + self.ttft_margin_ms

    def decode_ms(self, tokens: float) -> float:
        """Output tokens after the first."""
        return self.decode_ms_per_token * max(tokens - 1, 0.0)

    def service_ms(self, prompt_tokens: float, output_tokens: float) -> float:
        """From sending a prompt of ``prompt_tokens`` to its last token."""
        return self.prompt_ttft_ms(prompt_tokens) + self.decode_ms(output_tokens)


class GenerationCost:
    """One serving target: TTFT as a line in uncached prompt tokens, decode per token."""

    #: The prior's pseudo-points for the TTFT line sit at 0 and at this many uncached tokens.
    PRIOR_SPAN_TOKENS = 512.0
    ESTIMATE_TTL_S = 1.0

    def __init__(
        self, prior: GenerationPrior, learning: Learning, clock: Callable[[], float]
    ) -> None:
        self.prior = prior
        self.learning = learning
        self._lock = threading.Lock()
        self._ttft = _Samples(learning, clock)
        self._decode = _Samples(learning, clock)
        self._cached = _Samples(learning, clock)
        self._estimates: dict[float, tuple[float, GenerationEstimate]] = {}

    def recalibrate(self, prior: GenerationPrior) -> None:
        with self._lock:
            self.prior = prior
            self._estimates.clear()

    def observe_first_token(self, uncached_tokens: int, ttft_ms: float) -> None:
        """One request's prefill: ``ttft_ms`` from sending to the first token, its queue aside."""
        if ttft_ms >= 0 and math.isfinite(ttft_ms):
            with self._lock:
                self._ttft.add(float(max(uncached_tokens, 0)), ttft_ms)
                self._estimates.clear()

    def observe_refusal(self) -> None:
        """A request was refused on this target's predicted cost. It taught nothing, so what
        was learned ages as if ``REFUSAL_AGE`` requests had come since: a model made
        pessimistic by a slow period returns to its prior within a bounded number of refusals,
        and requests run again (and teach it the truth) instead of being refused for as long
        as its memory lasts."""
        with self._lock:
            self._ttft.age(REFUSAL_AGE)
            self._decode.age(REFUSAL_AGE)
            self._estimates.clear()

    def observe_cache(self, prompt_tokens: int, cached_tokens: int) -> None:
        """How much of a request's prompt the target found in its prefix cache."""
        if prompt_tokens > 0:
            with self._lock:
                self._cached.add(prompt_tokens, float(min(max(cached_tokens, 0), prompt_tokens)))
                self._estimates.clear()

    def observe_decode(self, tokens: int, elapsed_ms: float) -> None:
        """``tokens`` output tokens after the first took ``elapsed_ms``."""
        if tokens > 0 and elapsed_ms >= 0 and math.isfinite(elapsed_ms):
            with self._lock:
                self._decode.add(tokens, elapsed_ms / tokens)
                self._estimates.clear()

    def line(self) -> tuple[float, float]:
        """The fitted ``(fixed_ms, prefill_ms_per_token)``."""
        with self._lock:
            return self._fit(self._ttft.weighted())

    def _fit(self, points: list[tuple[float, float, float]]) -> tuple[float, float]:
        p, span = self.prior, self.PRIOR_SPAN_TOKENS
        lr = self.learning
        w0 = max(lr.prior_weight, lr.prior_weight_beside(sum(w for _, _, w in points)) / 2.0)
        pts = [
            *points,
            (0.0, p.fixed_ms, w0),
            (span, p.fixed_ms + p.prefill_ms_per_token * span, w0),
        ]
        sw = sum(w for _, _, w in pts)
        mx = sum(w * x for x, _, w in pts) / sw
        my = sum(w * y for _, y, w in pts) / sw
        sxx = sum(w * (x - mx) ** 2 for x, _, w in pts)
        sxy = sum(w * (x - mx) * (y - my) for x, y, w in pts)
        slope = sxy / sxx if sxx > 0 else p.prefill_ms_per_token
        fixed = my - slope * mx
        if slope < 0:  # no negative prefill: a flat line through the mean
            slope, fixed = 0.0, my
        if fixed < 0:  # no negative fixed cost: a line through the origin
            sxx0 = sum(w * x * x for x, _, w in pts)
            fixed, slope = 0.0, (sum(w * x * y for x, y, w in pts) / sxx0 if sxx0 else slope)
        return fixed, slope

    def estimate(self, quantile: float | None = None) -> GenerationEstimate:
        """The target's costs now, at ``quantile`` (the model's own by default).

        Cached until the next observation or for ``ESTIMATE_TTL_S``, since planning asks for it
        once per candidate plan."""
        q = self.learning.quantile if quantile is None else quantile
        now = self._ttft.clock()
        with self._lock:
            cached = self._estimates.get(q)
            if cached is not None and now - cached[0] < self.ESTIMATE_TTL_S:
                return cached[1]
            points = self._ttft.weighted()
            decode = [(y, w) for _, y, w in self._decode.weighted()]
            prefixes = [(y, w) for _, y, w in self._cached.weighted()]
            fixed, slope = self._fit(points)
        residuals = [(y - (fixed + slope * x), w) for x, y, w in points if w > 1e-3]
        margin = 0.0
        if len(residuals) >= 3:
            observed = sum(w for _, w in residuals)
            residuals.append((0.0, self.learning.prior_weight_beside(observed, q)))
            margin = max(weighted_quantile(residuals, q), 0.0)
        observed = sum(w for _, w in decode)
        decode.append(
            (self.prior.decode_ms_per_token, self.learning.prior_weight_beside(observed, q))
        )
        # Count on the prefix that all but the unluckiest recent requests found cached.
        prefix = weighted_quantile(prefixes, 1.0 - q) if len(prefixes) >= 3 else 0.0
        est = GenerationEstimate(fixed, slope, margin, weighted_quantile(decode, q), prefix)
        with self._lock:
            self._estimates[q] = (now, est)
        return est

    def ttft_ms(self, uncached_tokens: float, quantile: float | None = None) -> float:
        """Predicted TTFT (queue aside) at ``quantile`` for this many uncached prompt tokens."""
        return self.estimate(quantile).ttft_ms(uncached_tokens)

    def decode_ms_per_token(self, quantile: float | None = None) -> float:
        return self.estimate(quantile).decode_ms_per_token

    def decode_ms(self, tokens: float, quantile: float | None = None) -> float:
        """Predicted time for ``tokens`` output tokens after the first."""
        return self.estimate(quantile).decode_ms(tokens)

    def service_ms(self, prompt_tokens: float, output_tokens: float) -> float:
        """Predicted time from sending a prompt to its last token, at the model's quantile."""
        return self.estimate().service_ms(prompt_tokens, output_tokens)

    def snapshot(self) -> dict[str, object]:
        fixed, slope = self.line()
        with self._lock:
            ttft_n, decode_n = self._ttft.count, self._decode.count
        return {
            "fixed_ms": round(fixed, 3),
            "prefill_ms_per_token": round(slope, 4),
            "decode_ms_per_token": round(self.decode_ms_per_token(0.5), 4),
            f"decode_ms_per_token_p{round(self.learning.quantile * 100)}": round(
                self.decode_ms_per_token(), 4
            ),
            "ttft_ms_512_uncached": round(self.ttft_ms(512), 3),
            "cached_prefix_tokens": round(self.estimate().cached_prefix_tokens, 1),
            "observations": {"first_token": ttft_n, "decode": decode_n},
            "prior": {
                "source": self.prior.source,
                "fixed_ms": self.prior.fixed_ms,
                "prefill_ms_per_token": self.prior.prefill_ms_per_token,
                "decode_ms_per_token": self.prior.decode_ms_per_token,
            },
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
        self._targets: dict[str, GenerationCost] = {}
        self._lock = threading.Lock()

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

    def rate(self, stage: str) -> float:
        """ms per unit of ``stage`` at the model's quantile (0 when nothing is known)."""
        return self.stage(stage).rate()

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
            self._targets.clear()

    def targets(self) -> list[str]:
        with self._lock:
            return sorted(self._targets)

    def snapshot(self) -> dict[str, object]:
        with self._lock:
            stages = dict(self._stages)
            targets = dict(self._targets)
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
        }
