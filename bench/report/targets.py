"""The fast-path targets: each measure of this run beside its previous figure and its target.

``benchmarks/targets.json`` holds one row per measure: what it is, its unit, whether lower or
higher is better, the previous figure (from the run named in ``previous_run``), the target and
the goal, and why a row that misses is missed (read from the last profile; BENCHMARKS.md shows
the profile under the table). ``targets_section`` takes this run's figures from the bench JSON
files and writes the table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.harness.paths import BENCHMARKS_DIR
from bench.harness.results import BenchResult, Run

TARGETS_FILE = BENCHMARKS_DIR / "targets.json"
#: The setting a prompt-state run varies (``--prefix-states``: kept states against none).
PREFIX_STATES_VARIABLE = "RAGTIME_GENERATION_PREFIX_STATES"


@dataclass(frozen=True)
class Target:
    id: str
    measure: str
    unit: str  # "ms", "+ms", "req/s" or "%"
    better: str  # "lower" or "higher"
    target: float
    previous: float | None = None
    goal: float | None = None
    why: str = ""

    def met(self, value: float | None) -> bool | None:
        if value is None:
            return None
        return value <= self.target if self.better == "lower" else value >= self.target


def load_targets(path: Path = TARGETS_FILE) -> tuple[str, list[Target]]:
    """The name of the previous run and the rows of ``path``."""
    data = json.loads(path.read_text())
    return data.get("previous_run", ""), [Target(**row) for row in data["rows"]]


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "%":
        return f"{value:.1f}%"
    sign = "+" if unit == "+ms" else ""
    shown = f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"
    return f"{sign}{shown} {unit.lstrip('+')}"


def _run(result: BenchResult | None, *, users: int | None = None) -> Run | None:
    if result is None:
        return None
    return next((r for r in result.runs if users is None or r.users == users), None)


def _percent(value: float | None) -> float | None:
    return None if value is None else 100.0 * value


def _states_runs(result: BenchResult | None) -> tuple[Run | None, Run | None]:
    """The run with kept prompt states and the one without (``PREFIX_STATES_VARIABLE=0``)."""
    if result is None:
        return None, None
    off = {t.name for t in result.targets if t.config.get(PREFIX_STATES_VARIABLE) == "0"}
    kept = next((r for r in result.runs if r.target not in off), None)
    none = next((r for r in result.runs if r.target in off), None)
    return kept, none


def measured(
    *,
    cpu: BenchResult,
    overhead: BenchResult,
    ceilings: Sequence[BenchResult],
    prefix: BenchResult | None,
    prefix_states: BenchResult | None,
) -> dict[str, float | None]:
    """This run's figure for each target id (None where the run was not made)."""
    from bench.report.prefix_md import OURS, run_layouts

    one_user = _run(cpu, users=1)
    ttft = overhead.comparisons[0].ttft_ms["p50"].diff if overhead.comparisons else None
    ragtime = [
        c
        for result in ceilings
        for c in result.ceilings
        if any(t.name == c.target and t.kind != "floor" for t in result.targets)
    ]
    layouts = run_layouts(prefix) if prefix is not None else []
    ours = next((r for layout, r in layouts if layout == OURS), None)
    kept, _ = _states_runs(prefix_states)
    return {
        "cpu_ttft_p50": one_user.summary.ttft_ms.p50 if one_user else None,
        "overhead_ttft_p50": ttft,
        "null_ceiling_rps": ragtime[0].ceiling_rps if ragtime else None,
        "cpu_cached_ratio": _percent(ours.summary.cached_ratio) if ours else None,
        "repeat_cached_ratio": _percent(kept.summary.cached_ratio) if kept else None,
    }


def targets_section(
    figures: Mapping[str, float | None],
    *,
    profile: Path | None = None,
    path: Path = TARGETS_FILE,
    prefix_states: BenchResult | None = None,
) -> str:
    """The table of every target in ``path``, a line for each missed row, and the profile."""
    previous_run, targets = load_targets(path)
    rows = [
        "## Targets: this run against the previous one",
        "",
        f"Previous: {previous_run}. Targets and goals: `{path.name}` in `benchmarks/`.",
        "",
        "| measure | previous | now | target (goal) | met |",
        "| --- | --- | --- | --- | --- |",
    ]
    missed: list[Target] = []
    for t in targets:
        now = figures.get(t.id)
        met = t.met(now)
        if met is False:
            missed.append(t)
        sign = "<=" if t.better == "lower" else ">="
        aim = f"{sign} {_fmt(t.target, t.unit)}" + (
            f" ({_fmt(t.goal, t.unit)})" if t.goal is not None else ""
        )
        verdict = {True: "met", False: "**missed**", None: "not run"}[met]
        rows.append(
            f"| {t.measure} | {_fmt(t.previous, t.unit)} | {_fmt(now, t.unit)} | {aim} "
            f"| {verdict} |"
        )
    kept, none = _states_runs(prefix_states)
    if kept is not None and none is not None:
        a, b = kept.summary, none.summary
        rows += [
            "",
            "Prompt states on the repeat traffic, kept against none "
            f"(`{PREFIX_STATES_VARIABLE}`): cached-token share "
            f"{_fmt(_percent(a.cached_ratio), '%')} against "
            f"{_fmt(_percent(b.cached_ratio), '%')}, TTFT p50 "
            f"{a.ttft_ms.fmt('p50', 0)} against {b.ttft_ms.fmt('p50', 0)} ms "
            f"(n={a.ttft_ms.n} and {b.ttft_ms.n}).",
        ]
    if missed:
        rows += ["", "Why the missed rows miss:", ""]
        rows += [f"- {t.measure}: {t.why}" for t in missed]
    if profile is not None and profile.is_file():
        from bench.harness.profile import profile_table

        rows += [
            "",
            "Where the null-backend server's CPU goes (the overhead run, `ragtime bench load "
            "--profile`): our functions by their share of samples on the stack, then the "
            "hottest functions of any package by their share at the top.",
            "",
            profile_table(profile),
        ]
    return "\n".join(rows)
