"""Percentiles and summaries: every figure travels with the number of samples behind it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from pydantic import BaseModel

PERCENTILES = (50.0, 95.0, 99.0)


class Summary(BaseModel):
    """A distribution in a few numbers (milliseconds, unless named otherwise); ``None`` if empty.

    Percentiles are numpy's default (linear interpolation between the closest ranks), so the p99
    of fewer than 100 samples lies between the two largest.
    """

    n: int
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    min: float | None = None
    max: float | None = None

    def fmt(self, field: str = "p50", digits: int = 1) -> str:
        value = getattr(self, field)
        return "n/a" if value is None else f"{value:.{digits}f}"


def percentiles(values: Sequence[float], qs: Sequence[float] = PERCENTILES) -> list[float]:
    """The ``qs`` percentiles (0-100) of ``values``; raises ``ValueError`` when it is empty."""
    if len(values) == 0:
        raise ValueError("no samples")
    return [float(v) for v in np.percentile(np.asarray(values, dtype=float), list(qs))]


def summarize(values: Iterable[float]) -> Summary:
    data = np.asarray(list(values), dtype=float)
    if data.size == 0:
        return Summary(n=0)
    p50, p95, p99 = percentiles(data.tolist())
    return Summary(
        n=int(data.size),
        p50=round(p50, 4),
        p95=round(p95, 4),
        p99=round(p99, 4),
        mean=round(float(data.mean()), 4),
        min=round(float(data.min()), 4),
        max=round(float(data.max()), 4),
    )


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or ``None`` when either is missing or ``b`` is zero."""
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 4)
