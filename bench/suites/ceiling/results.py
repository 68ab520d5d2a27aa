"""What ``ragtime bench ceiling`` finds, and the targets it is judged by (issue 44 §3).

Each run sweeps the floor and ragtime side by side with wrk (``Sweep``: its phases and the
ceiling that ``bench.harness.results.ceiling_of`` finds in them), and measures both at a low
rate with the bench's own client (``LowRate``: TTFT p50 on questions never asked before, then on
one question asked again and again). ``CeilingBench`` (``schema_version``
``ragtime-bench-ceiling/1``) is the ``--json`` file; across runs it keeps the median and the
spread (``Spread``) of the ratio of the ceilings and of ragtime's TTFT p50 over the floor's.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from bench.harness.results import Ceiling, RatePoint, RunHeader, ceiling_of
from bench.suites.ceiling.wrk import WrkPhase

SCHEMA_VERSION = "ragtime-bench-ceiling/1"
#: Issue 44 §3: ragtime's ceiling at least this share of the floor's (default workers, 2 cores).
TARGET_RATIO = 0.75
#: Issue 44 §3: ragtime's TTFT p50 at most this many ms over the floor's, fresh and repeats.
TARGET_EXTRA_MS = 8.0
#: What the ceiling's rule judges in a wrk phase (wrk times the whole response).
MEASURE = "latency (whole response)"


class Sweep(BaseModel):
    """One target's rates in one run, and the ceiling found in them."""

    target: str
    phases: list[WrkPhase]
    ceiling: Ceiling


def sweep_of(target: str, phases: Sequence[WrkPhase], *, factor: float = 2.0) -> Sweep:
    """``target``'s phases with its ceiling: the highest rate whose whole-response p99 stayed
    under ``factor`` times its value at the lowest rate, with at most 1% errors."""
    mine = sorted((p for p in phases if p.target == target), key=lambda p: p.rate)
    points = [
        RatePoint(target=target, rate=p.rate, p99_ms=p.latency_ms.p99, error_ratio=p.error_ratio)
        for p in mine
    ]
    return Sweep(target=target, phases=mine, ceiling=ceiling_of(points, factor=factor,
                                                                measure=MEASURE))  # fmt: skip


class LowRate(BaseModel):
    """ragtime against the floor at a low rate, by the bench's own client (which reads the
    first ``token`` event: wrk cannot)."""

    questions: Literal["fresh", "repeats"]
    rate: float
    n_floor: int
    n_ragtime: int
    errors: int = Field(description="Requests of either target that were not answered.")
    floor_ttft_p50_ms: float | None
    ragtime_ttft_p50_ms: float | None
    floor_e2e_p50_ms: float | None
    ragtime_e2e_p50_ms: float | None
    extra_ms: float | None = Field(description="ragtime's TTFT p50 less the floor's.")
    ragtime_stages_p50_ms: dict[str, float] = Field(
        default_factory=dict,
        description="Each of ragtime's stages, p50 of its own timings (the `done` event's).",
    )


def low_rate_of(
    questions: Literal["fresh", "repeats"], rate: float, floor: Any, ragtime: Any
) -> LowRate:
    """The pair from the two ``bench.harness.results.Run`` of one low-rate measurement."""
    f, r = floor.summary, ragtime.summary
    extra = None
    if f.ttft_ms.p50 is not None and r.ttft_ms.p50 is not None:
        extra = round(r.ttft_ms.p50 - f.ttft_ms.p50, 3)
    return LowRate(
        questions=questions,
        rate=rate,
        n_floor=f.ttft_ms.n,
        n_ragtime=r.ttft_ms.n,
        errors=f.errors + r.errors,
        floor_ttft_p50_ms=f.ttft_ms.p50,
        ragtime_ttft_p50_ms=r.ttft_ms.p50,
        floor_e2e_p50_ms=f.e2e_ms.p50,
        ragtime_e2e_p50_ms=r.e2e_ms.p50,
        extra_ms=extra,
        ragtime_stages_p50_ms={
            stage: s.p50 for stage, s in r.stages_ms.items() if s.p50 is not None
        },
    )


class CeilingRun(BaseModel):
    """One run: both sweeps, their ratio, and the low-rate pairs."""

    number: int
    floor: Sweep
    ragtime: Sweep
    ratio: float | None = Field(description="ragtime's ceiling / the floor's.")
    low_rate: list[LowRate]
    loadavg: list[list[float]] = Field(
        default_factory=list, description="Load average (1, 5, 15 min) at its start and end."
    )


def ratio_of(floor: Ceiling, ragtime: Ceiling) -> float | None:
    """ragtime's ceiling over the floor's; ``None`` when either held no rate."""
    if not floor.ceiling_rps or ragtime.ceiling_rps is None:
        return None
    return round(ragtime.ceiling_rps / floor.ceiling_rps, 4)


class Spread(BaseModel):
    """A figure across runs: each run's value, their median, lowest and highest."""

    values: list[float]
    median: float
    min: float
    max: float


def spread(values: Sequence[float | None]) -> Spread | None:
    """The spread of the runs' values that exist (``None`` if none does)."""
    have = [v for v in values if v is not None]
    if not have:
        return None
    return Spread(
        values=have,
        median=round(statistics.median(have), 4),
        min=min(have),
        max=max(have),
    )


def stages_p50(runs: Sequence[CeilingRun], questions: str) -> dict[str, float]:
    """Each ragtime stage's p50 on ``questions``, the median across runs."""
    values: dict[str, list[float]] = {}
    for run in runs:
        for pair in run.low_rate:
            if pair.questions == questions:
                for stage, ms in pair.ragtime_stages_p50_ms.items():
                    values.setdefault(stage, []).append(ms)
    return {stage: round(statistics.median(v), 3) for stage, v in sorted(values.items())}


def extra_spread(runs: Sequence[CeilingRun], questions: str) -> Spread | None:
    """ragtime's TTFT p50 over the floor's on ``questions``, across runs."""
    return spread([p.extra_ms for run in runs for p in run.low_rate if p.questions == questions])


class Workers(BaseModel):
    """How many processes ragtime served with, and why."""

    setting: str = Field(description="RAGTIME_WORKERS as the config gives it (default auto).")
    resolved: int = Field(description="The processes `ragtime serve` started here.")
    cores: int = Field(description="The CPUs the server may use here.")
    auto_max: int = Field(description="The most processes auto starts (AUTO_WORKERS_MAX).")


class CeilingBench(RunHeader):
    schema_version: Literal["ragtime-bench-ceiling/1"] = "ragtime-bench-ceiling/1"
    generator: str = Field(description="wrk's version line.")
    generator_command: str = Field(description="The wrk command line of one phase, for example.")
    config_path: str
    config: dict[str, str]
    workers: Workers
    floor_tokens: int
    rates: list[float]
    seconds: float = Field(description="Measured seconds per rate, at least.")
    min_requests: int = Field(description="Requests per rate, at least (the lowest rates).")
    low_rate: float = Field(description="The rate of the low-rate TTFT pairs.")
    low_requests: int = Field(description="Requests per target in each low-rate pair.")
    runs: list[CeilingRun]
    ratio: Spread | None
    fresh_extra_ms: Spread | None
    repeats_extra_ms: Spread | None
    notes: list[str] = Field(default_factory=list)


def aggregate(runs: Sequence[CeilingRun]) -> dict[str, Spread | None]:
    """The figures across runs that ``CeilingBench`` keeps."""
    return {
        "ratio": spread([r.ratio for r in runs]),
        "fresh_extra_ms": extra_spread(runs, "fresh"),
        "repeats_extra_ms": extra_spread(runs, "repeats"),
    }


def met(bench: CeilingBench) -> dict[str, bool | None]:
    """Each target against the median across runs (``None``: not measured)."""
    ratio, fresh, repeats = bench.ratio, bench.fresh_extra_ms, bench.repeats_extra_ms
    return {
        "ratio": None if ratio is None else ratio.median >= TARGET_RATIO,
        "fresh": None if fresh is None else fresh.median <= TARGET_EXTRA_MS,
        "repeats": None if repeats is None else repeats.median <= TARGET_EXTRA_MS,
    }


def _fmt(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:g}{unit}"


def text_report(bench: CeilingBench) -> str:
    """The runs in a few lines, for the terminal."""
    lines = [f"{bench.generator}; ragtime with {bench.workers.resolved} processes"]
    for run in bench.runs:
        lines.append(
            f"run {run.number}: floor {_fmt(run.floor.ceiling.ceiling_rps, ' req/s')}, "
            f"ragtime {_fmt(run.ragtime.ceiling.ceiling_rps, ' req/s')}, "
            f"ratio {_fmt(run.ratio)}; "
            + "; ".join(f"{p.questions} TTFT p50 +{_fmt(p.extra_ms)} ms" for p in run.low_rate)
        )
    verdict = met(bench)
    for name, value in (
        ("ratio", bench.ratio),
        ("fresh", bench.fresh_extra_ms),
        ("repeats", bench.repeats_extra_ms),
    ):
        if value is not None:
            ok = {True: "met", False: "missed", None: "n/a"}[verdict[name]]
            lines.append(f"{name}: median {value.median:g} ({value.min:g}-{value.max:g}), {ok}")
    return "\n".join(lines)


def write_ceiling_json(bench: CeilingBench, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(bench.model_dump_json(indent=1) + "\n")


def read_ceiling_json(path: Path) -> CeilingBench:
    return CeilingBench.model_validate_json(path.read_text())
