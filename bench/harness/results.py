"""What a bench run produces: per-request records, per-run summaries, comparisons, ceilings.

``BenchResult`` is the schema of the ``--json`` file (``schema_version`` ``ragtime-bench/1``);
``BenchResult.model_validate_json`` reads one back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from bench.harness.client import RequestRecord
from bench.harness.stats import Summary, ratio, summarize

SCHEMA_VERSION = "ragtime-bench/1"


class RunSummary(BaseModel):
    requests: int
    ok: int
    errors: int
    error_ratio: float
    throughput_rps: float = Field(description="Requests answered in full per wall second.")
    offered_rps: float | None = Field(default=None, description="The open-loop arrival rate.")
    within_budget_ratio: float = Field(description="Answered in full within the budget.")
    budget_exceeded_ratio: float | None = Field(
        None, description="Of the answered, those the server reported over budget."
    )
    ttft_ms: Summary
    evidence_ms: Summary = Field(
        default_factory=lambda: summarize(()),
        description="Time to first evidence (the ``citations`` event), of the answered.",
    )
    itl_ms: Summary
    e2e_ms: Summary
    tokens: Summary
    start_lag_ms: Summary
    stages_ms: dict[str, Summary]
    degradations: dict[str, int]
    outcomes: dict[str, int]
    statuses: dict[str, int]
    prompt_tokens: int = Field(
        default=0,
        description="Prompt tokens summed over the answered requests that reported usage.",
    )
    cached_tokens: int = Field(
        default=0, description="Of those, the tokens served from the backend's prefix cache."
    )
    cached_ratio: float | None = Field(
        default=None, description="cached_tokens / prompt_tokens; None when no usage was reported."
    )
    cached_ratio_n: int = Field(default=0, description="Requests behind cached_ratio.")
    refused: int = Field(
        default=0, description="Refused at once by admission control (503 overloaded)."
    )
    refused_ms: Summary = Field(
        default_factory=lambda: summarize(()),
        description="How long a refusal took, from when the request was due.",
    )
    useful_rps: float = Field(
        default=0.0, description="Answers in full within their budget per wall second."
    )


class Run(BaseModel):
    """One target under one load, all its rounds together."""

    target: str
    load: str
    mode: Literal["closed", "open"]
    users: int | None = None
    rate: float | None = None
    wall_s: float
    summary: RunSummary
    requests: list[RequestRecord]


class Delta(BaseModel):
    baseline: float | None
    other: float | None
    diff: float | None
    ratio: float | None


class Comparison(BaseModel):
    """``other`` against ``baseline`` under the same load: differences and ratios."""

    load: str
    baseline: str
    other: str
    ttft_ms: dict[str, Delta]
    e2e_ms: dict[str, Delta]
    throughput_ratio: float | None


class Ceiling(BaseModel):
    """The highest swept rate at which TTFT p99 stayed under twice its low-load value."""

    target: str
    baseline_rate: float
    baseline_ttft_p99_ms: float | None
    limit_ttft_p99_ms: float | None
    ceiling_rps: float | None = Field(description="Highest rate that held; None if none did.")
    first_failing_rps: float | None = Field(description="First rate that did not hold, if any.")
    reason: str


class TargetInfo(BaseModel):
    name: str
    url: str
    kind: Literal["url", "ragtime", "floor"]
    config_path: str | None = None
    config: dict[str, str] = Field(default_factory=dict)


class RunHeader(BaseModel):
    """When, how and on what a bench ran: the head of every bench's ``--json`` file, each
    bench's result model naming its own ``schema_version``."""

    schema_version: str
    created: str = Field(description="When the run began (UTC, ISO 8601).")
    command: str = Field(description="The ragtime command line that ran it.")
    machine: dict[str, Any] = Field(description="Cores, CPU, memory, OS, load averages.")
    versions: dict[str, str] = Field(description="Python, the packages that matter, the commit.")


class BenchResult(RunHeader):
    schema_version: Literal["ragtime-bench/1"] = "ragtime-bench/1"
    targets: list[TargetInfo]
    runs: list[Run]
    comparisons: list[Comparison] = Field(default_factory=list)
    ceilings: list[Ceiling] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


def summarize_run(
    records: Sequence[RequestRecord], wall_s: float, *, offered_rps: float | None = None
) -> RunSummary:
    ok = [r for r in records if r.outcome == "ok"]
    n = len(records)
    stages: dict[str, list[float]] = {}
    for record in ok:
        for stage, ms in record.timings_ms.items():
            stages.setdefault(stage, []).append(ms)
    judged = [r.budget_exceeded for r in ok if r.budget_exceeded is not None]
    used = [r for r in ok if r.prompt_tokens is not None and r.cached_tokens is not None]
    refused = [r for r in records if r.status == 503 and (r.error or "").startswith("overloaded")]
    prompt_tokens = sum(r.prompt_tokens or 0 for r in used)
    cached_tokens = sum(r.cached_tokens or 0 for r in used)
    return RunSummary(
        requests=n,
        ok=len(ok),
        errors=n - len(ok),
        error_ratio=round((n - len(ok)) / n, 4) if n else 0.0,
        throughput_rps=round(len(ok) / wall_s, 3) if wall_s > 0 else 0.0,
        offered_rps=offered_rps,
        within_budget_ratio=round(sum(r.within_budget for r in records) / n, 4) if n else 0.0,
        budget_exceeded_ratio=round(sum(judged) / len(judged), 4) if judged else None,
        ttft_ms=summarize(r.ttft_ms for r in ok if r.ttft_ms is not None),
        evidence_ms=summarize(r.evidence_ms for r in ok if r.evidence_ms is not None),
        itl_ms=summarize(gap for r in ok for gap in r.itl_ms),
        e2e_ms=summarize(r.e2e_ms for r in ok if r.e2e_ms is not None),
        tokens=summarize(r.tokens for r in ok),
        start_lag_ms=summarize(r.start_lag_ms for r in records),
        stages_ms={stage: summarize(values) for stage, values in stages.items()},
        degradations=_count(d for r in ok for d in r.degradations),
        outcomes=_count(r.outcome for r in records),
        statuses=_count(str(r.status) for r in records),
        prompt_tokens=prompt_tokens,
        cached_tokens=cached_tokens,
        cached_ratio=ratio(cached_tokens, prompt_tokens) if used else None,
        cached_ratio_n=len(used),
        refused=len(refused),
        refused_ms=summarize(r.e2e_ms for r in refused if r.e2e_ms is not None),
        useful_rps=round(sum(r.within_budget for r in records) / wall_s, 3) if wall_s > 0 else 0.0,
    )


def _count(items: Iterable[str]) -> dict[str, int]:
    return dict(sorted(Counter(items).items()))


def compare(runs: Sequence[Run]) -> list[Comparison]:
    """Each target against the first one, load by load (runs keep their target order)."""
    by_load: dict[str, list[Run]] = {}
    for run in runs:
        by_load.setdefault(run.load, []).append(run)
    out: list[Comparison] = []
    for load, group in by_load.items():
        base = group[0]
        for other in group[1:]:
            out.append(
                Comparison(
                    load=load,
                    baseline=base.target,
                    other=other.target,
                    ttft_ms=_deltas(base.summary.ttft_ms, other.summary.ttft_ms),
                    e2e_ms=_deltas(base.summary.e2e_ms, other.summary.e2e_ms),
                    throughput_ratio=ratio(
                        other.summary.throughput_rps, base.summary.throughput_rps
                    ),
                )
            )
    return out


def _deltas(base: Summary, other: Summary) -> dict[str, Delta]:
    out: dict[str, Delta] = {}
    for field in ("p50", "p95", "p99"):
        b, o = getattr(base, field), getattr(other, field)
        diff = None if b is None or o is None else round(o - b, 4)
        out[field] = Delta(baseline=b, other=o, diff=diff, ratio=ratio(o, b))
    return out


class RatePoint(BaseModel):
    """One target at one offered rate, as the ceiling's rule reads it: whichever client measured
    it (``Run`` of the bench's own client, or a compiled load generator's phase)."""

    target: str
    rate: float
    p99_ms: float | None = Field(description="The latency p99 the rule judges (TTFT here).")
    error_ratio: float


def point_of(run: Run) -> RatePoint:
    """An open-loop run as the rule reads it: its TTFT p99 and its errors."""
    if run.rate is None:
        raise ValueError(f"{run.target}: {run.load} is not an open-loop run")
    return RatePoint(
        target=run.target,
        rate=run.rate,
        p99_ms=run.summary.ttft_ms.p99,
        error_ratio=run.summary.error_ratio,
    )


def holds(run: Run, limit_ttft_p99_ms: float | None, *, max_error_ratio: float = 0.01) -> bool:
    """Whether a run at some rate kept its TTFT p99 under the limit, with few errors."""
    p99, errors = run.summary.ttft_ms.p99, run.summary.error_ratio
    return point_holds(p99, errors, limit_ttft_p99_ms, max_error_ratio=max_error_ratio)


def point_holds(
    p99_ms: float | None,
    error_ratio: float,
    limit_ms: float | None,
    *,
    max_error_ratio: float = 0.01,
) -> bool:
    """The rule at one rate: a p99 under the limit (none yet: any p99), at most 1% errors."""
    if error_ratio > max_error_ratio or p99_ms is None:
        return False
    return limit_ms is None or p99_ms < limit_ms


def find_ceiling(runs: Sequence[Run], *, factor: float = 2.0) -> Ceiling:
    """Ceiling of one target from its open-loop runs (``ceiling_of`` on their TTFT p99)."""
    points = [point_of(r) for r in runs if r.rate is not None]
    if not points:
        raise ValueError("no open-loop runs to find a ceiling in")
    return ceiling_of(points, factor=factor)


def ceiling_of(
    points: Sequence[RatePoint], *, factor: float = 2.0, measure: str = "TTFT"
) -> Ceiling:
    """Ceiling of one target from its rate points: the highest rate whose p99 (of ``measure``)
    stayed under ``factor`` times its value at the lowest rate, with at most 1% errors.

    A failing rate below a higher one that held is reported as an isolated failure (a stall of a
    noisy machine), not as the ceiling.
    """
    ordered = sorted(points, key=lambda p: p.rate)
    if not ordered:
        raise ValueError("no rates to find a ceiling in")
    base = ordered[0]
    base_p99 = base.p99_ms
    limit = None if base_p99 is None else round(base_p99 * factor, 4)
    held = [
        p.rate for p in ordered if limit is not None and point_holds(p.p99_ms, p.error_ratio, limit)
    ]
    ceiling = max(held, default=None)
    failed = [p for p in ordered if p.rate not in held]
    above = [p for p in failed if ceiling is None or p.rate > ceiling]
    blips = [p for p in failed if p not in above]
    if above:
        first = above[0]
        reason = (
            f"at {first.rate:g} req/s {measure} p99 was {_num(first.p99_ms)} ms "
            f"(limit {_num(limit)} ms), errors {first.error_ratio:.1%}"
        )
    else:
        reason = (
            f"{measure} p99 stayed under {factor:g}x its value at {base.rate:g} req/s throughout"
        )
    if blips:
        rates = ", ".join(f"{p.rate:g}" for p in blips)
        reason += f"; isolated failures below the ceiling at {rates} req/s"
    return Ceiling(
        target=base.target,
        baseline_rate=base.rate,
        baseline_ttft_p99_ms=base_p99,
        limit_ttft_p99_ms=limit,
        ceiling_rps=ceiling,
        first_failing_rps=above[0].rate if above else None,
        reason=reason,
    )


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"
