"""Calibration: a target's fixed cost, prefill and decode rates, measured by a short probe.

A remote target (an SGLang endpoint, say) must not be planned with our CPU's figures. When it
joins, ``calibrate`` sends it three small requests through a ``Probe`` (the caller builds one
per target from its backend): two tiny prompts for one token each (the fixed cost; the second
runs warm), and one prompt of ``long_tokens`` fresh tokens for ``decode_tokens`` tokens (prefill
per token over the fixed cost, then decode per token). The result becomes the target's prior in
the cost model, the figure it decays back to. ``Calibrator.sync`` (called periodically by
``BudgetEngine.maintain``) re-probes a target each time it reappears among the targets that are
up, and feeds each target's own reported inter-token latency (SGLang's ``/metrics``) to its
decode estimate as it moves.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from tracing.budget.cost_model import CostModel, GenerationPrior

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbeResult:
    prompt_tokens: int
    cached_tokens: int
    ttft_ms: float
    output_tokens: int
    total_ms: float


Probe = Callable[[int, int], Awaitable[ProbeResult]]
"""``probe(prompt_tokens, max_tokens)``: one request of a fresh prompt of about that many tokens."""


async def calibrate(
    probe: Probe, *, long_tokens: int = 384, decode_tokens: int = 16
) -> GenerationPrior:
    """Measure one target's costs with three probes."""
    first = await probe(8, 1)
    warm = await probe(8, 1)
    long = await probe(long_tokens, decode_tokens)
    fixed = min(first.ttft_ms, warm.ttft_ms)
    short_uncached = warm.prompt_tokens - warm.cached_tokens
    long_uncached = long.prompt_tokens - long.cached_tokens
    prefill = max(long.ttft_ms - fixed, 0.0) / max(long_uncached - short_uncached, 1)
    decode = max(long.total_ms - long.ttft_ms, 0.0) / max(long.output_tokens - 1, 1)
    return GenerationPrior(
        fixed_ms=round(fixed, 3),
        prefill_ms_per_token=round(prefill, 5),
        decode_ms_per_token=round(decode, 4),
        source="calibration",
    )


class Calibrator:
    """Keeps every target that is up calibrated, in the background."""

    def __init__(self, cost: CostModel) -> None:
        self.cost = cost
        self.calibrated: dict[str, GenerationPrior] = {}
        self.failures: dict[str, str] = {}
        self._present: set[str] = set()

    async def sync(
        self,
        probes: Mapping[str, Probe],
        itl_ms: Callable[[str], float | None] | None = None,
    ) -> None:
        """Calibrate each target in ``probes`` that is new or came back; learn reported ITLs."""
        joined = [t for t in probes if t not in self._present]
        self._present = set(probes)
        for target in joined:
            try:
                prior = await calibrate(probes[target])
            except Exception as exc:  # a probe that fails leaves the target on its prior
                self.failures[target] = f"{type(exc).__name__}: {exc}"
                self._present.discard(target)  # try again next time
                log.warning("calibration of %s failed: %s", target, exc)
                continue
            self.failures.pop(target, None)
            self.calibrated[target] = prior
            self.cost.calibrate(target, prior)
            log.info("calibrated %s: %s", target, prior)
        if itl_ms is not None:
            for target in probes:
                itl = itl_ms(target)
                if itl is not None and itl > 0:
                    self.cost.generation(target).observe_decode(1, itl)
