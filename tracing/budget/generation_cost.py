"""Generation's cost, one ``GenerationCost`` per serving target (a backend endpoint and its model).

Time to first token = ``fixed + prefill * uncached prompt tokens`` (the queue wait aside), then
``decode`` per further output token. The two TTFT terms are a weighted least-squares line through
recent (uncached tokens, TTFT) points, so a fully cached prompt is a point near ``x = 0`` that
informs the fixed cost and leaves the per-token slope alone: cache hits cannot poison the prefill
rate, as they did when TTFT was divided by ``max(uncached, 1)``. The prior (``GenerationPrior``:
our CPU's measurement for llama.cpp, or a target's calibration probe) enters the line as two
pseudo-points. Predictions are made at a quantile: the line's prediction plus the quantile of
the observations' distance above it (``GenerationEstimate``).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tracing.budget.observations import (
    REFUSAL_AGE,
    Estimates,
    Learning,
    Ordered,
    Samples,
)


@dataclass(frozen=True)
class GenerationPrior:
    """A target's costs before (or beside) what its requests show."""

    fixed_ms: float
    """Time to first token of an empty prompt: scheduling, one forward pass, the first hop."""
    prefill_ms_per_token: float
    decode_ms_per_token: float
    source: str = "prior"
    """Where the figures come from: ``prior`` (our CPU's measurement) or ``calibration``."""


#: SmolLM2-135M through llama.cpp on our 2 cores.
CPU_GENERATION_PRIOR = GenerationPrior(
    fixed_ms=60.0, prefill_ms_per_token=2.5, decode_ms_per_token=12.0, source="prior"
)


@dataclass(frozen=True)
class GenerationEstimate:
    """A target's fitted costs at one quantile: plain arithmetic for the planner."""

    fixed_ms: float
    prefill_ms_per_token: float
    ttft_margin_ms: float
    """The quantile of observed minus fitted TTFT: how far above the line the quantile lies (at
    least 0 from the median up; below the median, for a floor, it may lie below). Additive: a
    ratio would blow up near the origin, where cache hits sit."""
    decode_ms_per_token: float
    cached_prefix_tokens: float = 0.0
    """Prompt tokens a new request can count on finding cached (the shared system prompt and
    template): a low quantile of what recent requests found."""

    def prompt_ttft_ms(self, prompt_tokens: float) -> float:
        """TTFT of a prompt of ``prompt_tokens``, less the prefix it can count on finding cached."""
        return self.ttft_ms(max(prompt_tokens - self.cached_prefix_tokens, 1.0))

    def ttft_ms(self, uncached_tokens: float) -> float:
        fitted = self.fixed_ms + self.prefill_ms_per_token * max(uncached_tokens, 0.0)
        return max(fitted + self.ttft_margin_ms, 0.0)

    def decode_ms(self, tokens: float) -> float:
        """Output tokens after the first."""
        return self.decode_ms_per_token * max(tokens - 1, 0.0)

    def service_ms(self, prompt_tokens: float, output_tokens: float) -> float:
        """From sending a prompt of ``prompt_tokens`` to its last token."""
        return self.prompt_ttft_ms(prompt_tokens) + self.decode_ms(output_tokens)


@dataclass(frozen=True)
class _Basis:
    """What every quantile's estimate of a target is read from, kept as ``Estimates`` keeps it."""

    fixed_ms: float
    slope: float
    residuals: Ordered
    decode: Ordered
    prefixes: Ordered


class GenerationCost:
    """One serving target: TTFT as a line in uncached prompt tokens, decode per token."""

    #: The prior's pseudo-points for the TTFT line sit at 0 and at this many uncached tokens.
    PRIOR_SPAN_TOKENS = 512.0

    def __init__(
        self, prior: GenerationPrior, learning: Learning, clock: Callable[[], float]
    ) -> None:
        self.prior = prior
        self.learning = learning
        self._lock = threading.Lock()
        self._ttft = Samples(learning, clock)
        self._decode = Samples(learning, clock, recovers=True)
        self._cached = Samples(learning, clock)
        self._estimates: Estimates[GenerationEstimate] = Estimates(learning.refresh_s)
        self._bases: Estimates[_Basis] = Estimates(learning.refresh_s)

    def _forget_estimates(self) -> None:
        """Held with the lock: what was learned changed (``Estimates.changed``)."""
        self._estimates.changed()
        self._bases.changed()

    def recalibrate(self, prior: GenerationPrior) -> None:
        """A new prior: no estimate read from the old one stands."""
        with self._lock:
            self.prior = prior
            self._estimates.clear()
            self._bases.clear()

    def observe_first_token(self, uncached_tokens: int, ttft_ms: float) -> None:
        """One request's prefill: ``ttft_ms`` from sending to the first token, its queue aside."""
        if ttft_ms >= 0 and math.isfinite(ttft_ms):
            with self._lock:
                self._ttft.add(float(max(uncached_tokens, 0)), ttft_ms)
                self._forget_estimates()

    def observe_refusal(self) -> None:
        """A request was refused on this target's predicted cost. It taught nothing, so what
        was learned ages as if ``REFUSAL_AGE`` requests had come since: a model made
        pessimistic by a slow period returns to its prior within a bounded number of refusals,
        and requests run again (and teach it the truth) instead of being refused for as long
        as its memory lasts. Read afresh at once, whatever ``refresh_s`` says."""
        with self._lock:
            self._ttft.age(REFUSAL_AGE)
            self._decode.age(REFUSAL_AGE)
            self._estimates.clear()
            self._bases.clear()

    def observe_cache(self, prompt_tokens: int, cached_tokens: int) -> None:
        """How much of a request's prompt the target found in its prefix cache."""
        if prompt_tokens > 0:
            with self._lock:
                self._cached.add(prompt_tokens, float(min(max(cached_tokens, 0), prompt_tokens)))
                self._forget_estimates()

    def observe_decode(self, tokens: int, elapsed_ms: float) -> None:
        """``tokens`` output tokens after the first took ``elapsed_ms``."""
        if tokens > 0 and elapsed_ms >= 0 and math.isfinite(elapsed_ms):
            with self._lock:
                slow_period = self._decode.add(tokens, elapsed_ms / tokens)
                if slow_period is not None:
                    # The target was slow then: its first tokens too (a line, not a rate, has
                    # no slow period of its own to find).
                    self._ttft.drop_between(*slow_period)
                self._forget_estimates()

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

        Kept as ``Estimates`` keeps it, since planning asks for it once per candidate plan; the
        fit and the observations in order behind it (``_basis``) are kept alike, since each is
        read at several quantiles."""
        q = self.learning.quantile if quantile is None else quantile
        now = self._ttft.clock()
        with self._lock:
            cached = self._estimates.get(q, now)
            if cached is not None:
                return cached
        basis = self._basis(now)
        margin = 0.0
        if len(basis.residuals) >= 3:
            beside = (0.0, self.learning.prior_weight_beside(basis.residuals.total, q))
            margin = basis.residuals.quantile(q, beside)
            if q >= 0.5:  # a prediction to plan by never lies below the line; a floor may
                margin = max(margin, 0.0)
        decode_prior = self.prior.decode_ms_per_token
        decode_beside = (decode_prior, self.learning.prior_weight_beside(basis.decode.total, q))
        decode = basis.decode.quantile(q, decode_beside)
        # Count on the prefix that all but the unluckiest recent requests found cached.
        prefix = basis.prefixes.quantile(1.0 - q) if len(basis.prefixes) >= 3 else 0.0
        est = GenerationEstimate(basis.fixed_ms, basis.slope, margin, decode, prefix)
        with self._lock:
            self._estimates.put(q, now, est)
        return est

    def _basis(self, now: float) -> _Basis:
        """The fitted line and the observations in order, as weighed now."""
        with self._lock:
            basis = self._bases.get(None, now)
            if basis is not None:
                return basis
            points = self._ttft.weighted()
            decode = self._decode.ordered()
            prefixes = self._cached.ordered()
            fixed, slope = self._fit(points)
        residuals = Ordered([(y - (fixed + slope * x), w) for x, y, w in points if w > 1e-3])
        basis = _Basis(fixed, slope, residuals, decode, prefixes)
        with self._lock:
            self._bases.put(None, now, basis)
        return basis

    def ttft_ms(self, uncached_tokens: float, quantile: float | None = None) -> float:
        """Predicted TTFT (queue aside) at ``quantile`` for this many uncached prompt tokens."""
        return self.estimate(quantile).ttft_ms(uncached_tokens)

    def least_first_token_ms(self, prompt_tokens: int, quantile: float = 0.05) -> float:
        """The least time to a prompt of ``prompt_tokens``' first token, queue aside: the line
        and its observations' distance from it at a low ``quantile``, with the prefix nearly
        every recent request found cached left out."""
        return self.estimate(quantile).prompt_ttft_ms(prompt_tokens)

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
