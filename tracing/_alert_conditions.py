"""The conditions of ``deploy/prometheus/alerts.yml``, computed from snapshots of a registry.

A ``Snapshot`` keeps the few samples the conditions read. The increase of each sample between two
snapshots stands in for PromQL's ``rate()`` over the window: every condition is a ratio or a
quantile of rates taken over the same window, which equals the same of increases. A counter that
went backwards was reset and counts from zero, as ``rate()`` has it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs
SampleKey = tuple[str, Labels]  # (sample name, labels)
Increase = Mapping[SampleKey, float]

STAGE_OVERRUNS = "ragtime_stage_budget_exceeded_total"
STAGE_RUNS = "ragtime_stage_duration_seconds_count"
TTFT_BUCKETS = "ragtime_ttft_seconds_bucket"
REQUESTS = "ragtime_requests_total"
REFUSED = "ragtime_admission_refused_total"
WATCHED = frozenset({STAGE_OVERRUNS, STAGE_RUNS, TTFT_BUCKETS, REQUESTS, REFUSED})


@dataclass(frozen=True)
class Snapshot:
    """The watched samples of a registry at ``at`` (seconds of the evaluator's clock)."""

    at: float
    values: Mapping[SampleKey, float]

    @classmethod
    def take(cls, registry: CollectorRegistry, at: float) -> Snapshot:
        values: dict[SampleKey, float] = {}
        for family in registry.collect():
            for sample in family.samples:
                if sample.name in WATCHED:
                    values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return cls(at, values)

    def increase_since(self, earlier: Snapshot) -> dict[SampleKey, float]:
        """Each sample's growth since ``earlier``; a sample new since then grew from zero."""
        increase: dict[SampleKey, float] = {}
        for key, value in self.values.items():
            before = earlier.values.get(key, 0.0)
            increase[key] = value - before if value >= before else value
        return increase


def _sum_by(increase: Increase, name: str, label: str) -> dict[Labels, float]:
    sums: dict[Labels, float] = {}
    for (sample, labels), value in increase.items():
        if sample == name:
            group = tuple(pair for pair in labels if pair[0] == label)
            sums[group] = sums.get(group, 0.0) + value
    return sums


def stage_violation_ratios(increase: Increase) -> dict[Labels, float]:
    """Per stage, the share of its runs that overran their budget allocation."""
    runs = _sum_by(increase, STAGE_RUNS, "stage")
    overruns = _sum_by(increase, STAGE_OVERRUNS, "stage")
    return {stage: overruns[stage] / n for stage, n in runs.items() if n > 0 and stage in overruns}


def histogram_quantile(q: float, buckets: Mapping[float, float]) -> float:
    """PromQL's ``histogram_quantile`` over cumulative counts keyed by upper bound; NaN if empty.

    The quantile is interpolated linearly inside its bucket (the first bucket starting at 0); one
    falling in the ``+Inf`` bucket is the upper bound of the bucket below it.
    """
    bounds = sorted(buckets)
    if len(bounds) < 2 or bounds[-1] != math.inf:
        return math.nan
    counts = [buckets[bound] for bound in bounds]
    for i in range(1, len(counts)):  # scrapes are not atomic: keep the counts monotonic
        counts[i] = max(counts[i], counts[i - 1])
    total = counts[-1]
    if total <= 0:
        return math.nan
    rank = q * total
    i = next(i for i, count in enumerate(counts) if count >= rank)
    if i == len(bounds) - 1:
        return bounds[-2]
    if i == 0 and bounds[0] <= 0:
        return bounds[0]
    lower, below = (0.0, 0.0) if i == 0 else (bounds[i - 1], counts[i - 1])
    in_bucket = counts[i] - below
    if in_bucket <= 0:
        return bounds[i]
    return lower + (bounds[i] - lower) * (rank - below) / in_bucket


def ttft_p95(increase: Increase) -> dict[Labels, float]:
    """The 95th percentile of time to first token (all series summed by ``le``), if any."""
    buckets: dict[float, float] = {}
    for (sample, labels), value in increase.items():
        if sample == TTFT_BUCKETS:
            bound = float(dict(labels)["le"])
            buckets[bound] = buckets.get(bound, 0.0) + value
    p95 = histogram_quantile(0.95, buckets)
    return {} if math.isnan(p95) else {(): p95}


def error_ratio(increase: Increase) -> dict[Labels, float]:
    """The share of admitted HTTP requests answered with a 5xx status, if any were admitted.

    Admission control's refusals (503 ``overloaded`` or ``shutting_down``, counted in
    ``ragtime_admission_refused_total``) are deliberate: they leave both sides of the ratio, so
    shedding load never pages, and cannot dilute the failures of the requests that were served.
    """
    total = errors = refused = 0.0
    for (sample, labels), value in increase.items():
        if sample == REQUESTS:
            total += value
            if dict(labels).get("status", "").startswith("5"):
                errors += value
        elif sample == REFUSED:
            refused += value
    admitted = total - refused
    return {(): max(errors - refused, 0.0) / admitted} if admitted > 0 else {}


def _percent(value: float) -> str:
    return f"{value * 100:.4g}%"


def _duration(seconds: float) -> str:
    return f"{seconds:.4g}s" if seconds >= 1 else f"{seconds * 1000:.4g}ms"


def _window(seconds: float) -> str:
    if seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return f"{seconds:g} seconds"


Annotate = Callable[["AlertRule", dict[str, str], float, float], dict[str, str]]


@dataclass(frozen=True)
class AlertRule:
    """An alert: ``measure`` gives a value per label set; a value over ``threshold`` breaches."""

    name: str
    severity: str
    threshold: float
    measure: Callable[[Increase], dict[Labels, float]]
    annotate: Annotate  # (rule, labels, value, window_s) -> summary and description

    def breaches(self, increase: Increase) -> dict[Labels, float]:
        return {labels: v for labels, v in self.measure(increase).items() if v > self.threshold}


def _stage_annotations(
    rule: AlertRule, labels: dict[str, str], value: float, window_s: float
) -> dict[str, str]:
    stage, share = labels.get("stage", ""), _percent(value)
    return {
        "summary": f"Stage {stage} overran its budget in {share} of runs",
        "description": f"Over the last {_window(window_s)} {share} of the runs of stage {stage} "
        f"overran their budget allocation (threshold {_percent(rule.threshold)}).",
    }


def _ttft_annotations(
    rule: AlertRule, labels: dict[str, str], value: float, window_s: float
) -> dict[str, str]:
    target = _duration(rule.threshold)
    return {
        "summary": f"TTFT p95 is {_duration(value)}, over the {target} target",
        "description": "The 95th percentile of time to first token over the last "
        f"{_window(window_s)} is {_duration(value)}; the target is {target}.",
    }


def _error_annotations(
    rule: AlertRule, labels: dict[str, str], value: float, window_s: float
) -> dict[str, str]:
    return {
        "summary": f"{_percent(value)} of requests failed with a 5xx status",
        "description": f"Over the last {_window(window_s)} {_percent(value)} of HTTP requests "
        f"were answered with a 5xx status (threshold {_percent(rule.threshold)}).",
    }


def budget_rules(
    *, stage_violation_ratio: float, ttft_p95_s: float, error_ratio_max: float
) -> tuple[AlertRule, ...]:
    """The ``ragtime-budget`` group of alerts.yml, with these thresholds."""
    return (
        AlertRule(
            "RagtimeStageBudgetViolations",
            "warning",
            stage_violation_ratio,
            stage_violation_ratios,
            _stage_annotations,
        ),
        AlertRule("RagtimeTTFTP95High", "warning", ttft_p95_s, ttft_p95, _ttft_annotations),
        AlertRule(
            "RagtimeErrorRatioHigh", "critical", error_ratio_max, error_ratio, _error_annotations
        ),
    )
