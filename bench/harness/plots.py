"""PNG plots of a bench run: latency CDFs, stage breakdown, TTFT against offered load.

Figures are built with matplotlib's object API (``Figure``, rendered by Agg), never pyplot, so
plotting holds no global state and needs no display.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import NullLocator

from bench.harness.results import Run


def latency_cdfs(runs: Sequence[Run], path: Path, *, title: str = "") -> Path:
    """TTFT and end-to-end CDFs, one line per target and load."""
    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2)
    for metric, ax, name in (("ttft_ms", axes[0], "TTFT"), ("e2e_ms", axes[1], "end to end")):
        for run in runs:
            values = sorted(
                v
                for r in run.requests
                if r.outcome == "ok" and (v := getattr(r, metric)) is not None
            )
            if not values:
                continue
            ys = [(i + 1) / len(values) for i in range(len(values))]
            ax.step(values, ys, where="post", label=f"{run.target}, {run.load} (n={len(values)})")
        ax.set_xscale("log")
        ax.set_xlabel(f"{name} (ms, log scale)")
        ax.set_ylabel("fraction of requests")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(title or "Latency CDFs")
    return _save(fig, path)


def stage_breakdown(runs: Sequence[Run], path: Path, *, title: str = "") -> Path:
    """Median and p95 time of each stage as the server reports it, one bar per target and load.

    Bars sit side by side, not stacked: stages may overlap (the answer filter's inline work is
    charged to ``moderate.answer`` and happens during ``generate``).
    """
    shown = [r for r in runs if r.summary.stages_ms]
    stages: list[str] = []
    for run in shown:
        stages += [s for s in run.summary.stages_ms if s not in stages]
    fig = Figure(figsize=(11, max(3.0, 0.28 * len(stages) * max(len(shown), 1) + 1.5)))
    ax = fig.subplots()
    height = 0.8 / max(len(shown), 1)
    for i, run in enumerate(shown):
        got = [run.summary.stages_ms.get(stage) for stage in stages]
        p50 = [(g.p50 if g and g.p50 is not None else 0.0) for g in got]
        p95 = [(g.p95 if g and g.p95 is not None else 0.0) for g in got]
        ys = [j + i * height for j in range(len(stages))]
        errors = [[0.0] * len(stages), [max(0.0, b - a) for a, b in zip(p50, p95, strict=True)]]
        ax.barh(
            ys, p50, height=height, xerr=errors, capsize=2,
            label=f"{run.target}, {run.load} (n={run.summary.ok})",
        )  # fmt: skip
    ax.set_yticks([j + 0.4 - height / 2 for j in range(len(stages))], stages)
    ax.invert_yaxis()
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("time per stage (ms; bar: median, whisker: p95), as the server reports it")
    if stages:
        ax.legend(fontsize=7, loc="upper right")
    else:
        ax.text(0.5, 0.5, "no stage timings reported", ha="center", transform=ax.transAxes)
    ax.grid(True, axis="x", alpha=0.3)
    fig.suptitle(title or "Per-stage breakdown")
    return _save(fig, path)


def ttft_vs_load(runs: Sequence[Run], path: Path, *, title: str = "") -> Path:
    """TTFT p50 and p99 against the offered open-loop rate, one pair of lines per target."""
    fig = Figure(figsize=(8, 4.5))
    ax = fig.subplots()
    targets: list[str] = []
    for run in runs:
        if run.rate is not None and run.target not in targets:
            targets.append(run.target)
    for target in targets:
        points = sorted(
            (r.rate, r.summary.ttft_ms.p50, r.summary.ttft_ms.p99)
            for r in runs
            if r.target == target
            and r.rate is not None
            and r.summary.ttft_ms.p50 is not None
            and r.summary.ttft_ms.p99 is not None
        )
        rates = [p[0] for p in points]
        (line,) = ax.plot(rates, [p[2] for p in points], marker="o", label=f"{target} p99")
        ax.plot(
            rates,
            [p[1] for p in points],
            marker=".",
            linestyle="--",
            color=line.get_color(),
            label=f"{target} p50",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    swept = sorted({r.rate for r in runs if r.rate is not None})
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(swept, [f"{rate:g}" for rate in swept])
    ax.set_xlabel("offered load (requests/s, Poisson arrivals)")
    ax.set_ylabel("TTFT (ms)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle(title or "TTFT against offered load")
    return _save(fig, path)


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def plot_all(runs: Sequence[Run], directory: Path, *, prefix: str = "") -> list[Path]:
    """Every plot that fits ``runs``: stages only when the server reported them, TTFT against
    load only when rates were swept."""
    paths = [latency_cdfs(runs, directory / f"{prefix}latency-cdf.png")]
    if any(r.summary.stages_ms for r in runs):
        paths.append(stage_breakdown(runs, directory / f"{prefix}stages.png"))
    if len({r.rate for r in runs if r.rate is not None}) > 1:
        paths.append(ttft_vs_load(runs, directory / f"{prefix}ttft-vs-load.png"))
    return paths
