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

BUDGET_BREACHES = "ragtime_budget_exceeded_total"
OUTCOMES = "ragtime_request_outcomes_total"
STAGE_OVERRUNS = "ragtime_stage_budget_exceeded_total"
STAGE_RUNS = "ragtime_stage_duration_seconds_count"
TTFT_TARGET_BUCKETS = "ragtime_ttft_target_ratio_bucket"
REQUESTS = "ragtime_requests_total"
REFUSED = "ragtime_admission_refused_total"
WATCHED = frozenset(
    {BUDGET_BREACHES, OUTCOMES, STAGE_OVERRUNS, STAGE_RUNS, TTFT_TARGET_BUCKETS, REQUESTS, REFUSED}
)


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


def _sum_where(
    increase: Increase, name: str, label: str, keep: Callable[[dict[str, str]], bool]
) -> dict[Labels, float]:
    kept = {key: v for key, v in increase.items() if key[0] == name and keep(dict(key[1]))}
    return _sum_by(kept, name, label)


def budget_violation_ratios(increase: Increase) -> dict[Labels, float]:
    """Per route, the share of its admitted requests that broke their budget: ended after it
    ran out, or answered 504 after admission. Admitted: every request with an outcome but the
    callers' errors (``rejected``, 4xx) and the 504s refused at the door for a budget no plan
    can meet (``budget_infeasible``), which anyone may send."""
    breaches = _sum_by(increase, BUDGET_BREACHES, "route")
    requests = _sum_where(increase, OUTCOMES, "route", lambda la: la.get("outcome") != "rejected")
    refused = _sum_where(
        increase, REFUSED, "route", lambda la: la.get("reason") == "budget_infeasible"
    )
    ratios = {}
    for route, n in requests.items():
        admitted = n - refused.get(route, 0.0)
        if admitted > 0 and route in breaches:
            ratios[route] = breaches[route] / admitted
    return ratios


def stage_violation_ratios(increase: Increase) -> dict[Labels, float]:
    """Per stage, the share of its runs that overran the allocation the plan gave them."""
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


def ttft_target_p95(increase: Increase) -> dict[Labels, float]:
    """The 95th percentile of answers' first token over their target (all routes summed by
    ``le``), if any answer had a target: over 1, more than 5% of them missed it."""
    buckets: dict[float, float] = {}
    for (sample, labels), value in increase.items():
        if sample == TTFT_TARGET_BUCKETS:
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


def _budget_annotations(
    rule: AlertRule, labels: dict[str, str], value: float, window_s: float
) -> dict[str, str]:
    route, share = labels.get("route", ""), _percent(value)
    return {
        "summary": f"{share} of {route} requests broke their budget",
        "description": f"Over the last {_window(window_s)} {share} of the requests admitted to "
        f"{route} ended after their budget ran out or were answered 504 (threshold "
        f"{_percent(rule.threshold)}).",
    }


def _stage_annotations(
    rule: AlertRule, labels: dict[str, str], value: float, window_s: float
) -> dict[str, str]:
    stage, share = labels.get("stage", ""), _percent(value)
    return {
        "summary": f"Stage {stage} overran its planned allocation in {share} of runs",
        "description": f"Over the last {_window(window_s)} {share} of the runs of stage {stage} "
        f"overran the allocation the plan gave them (threshold {_percent(rule.threshold)}).",
    }


def _ttft_annotations(
    rule: AlertRule, labels: dict[str, str], value: float, window_s: float
) -> dict[str, str]:
    return {
        "summary": f"First tokens later than their target: p95 at {value:.2f} times it",
        "description": f"Over the last {_window(window_s)} more than 5% of the answers held to a "
        "first-token target (the request's ttft_target_ms, else RAGTIME_TTFT_TARGET_MS) had "
        f"their first token after it; the 95th percentile is {value:.2f} times the target.",
    }


def _error_annotations(
    rule: AlertRule, labels: dict[str, str], value: float, window_s: float
) -> dict[str, str]:
    return {
        "summary": f"{_percent(value)} of requests failed with a 5xx status",
        "description": f"Over the last {_window(window_s)} {_percent(value)} of HTTP requests "
        f"were answered with a 5xx status (threshold {_percent(rule.threshold)}).",
    }


#: The TTFT alert's threshold: a first token at its target, no later (the p95 of first token
#: over target is over 1 exactly when more than 5% of the answers missed their target).
TTFT_AT_TARGET = 1.0


def budget_rules(
    *, budget_violation_ratio: float, stage_violation_ratio: float, error_ratio_max: float
) -> tuple[AlertRule, ...]:
    """The ``ragtime-budget`` group of alerts.yml, with these thresholds."""
    return (
        AlertRule(
            "RagtimeBudgetViolations",
            "critical",
            budget_violation_ratio,
            budget_violation_ratios,
            _budget_annotations,
        ),
        AlertRule(
            "RagtimeStageBudgetViolations",
            "warning",
            stage_violation_ratio,
            stage_violation_ratios,
            _stage_annotations,
        ),
        AlertRule(
            "RagtimeTTFTP95High", "warning", TTFT_AT_TARGET, ttft_target_p95, _ttft_annotations
        ),
        AlertRule(
            "RagtimeErrorRatioHigh", "critical", error_ratio_max, error_ratio, _error_annotations
        ),
    )
