"""Markdown tables of a load run's figures: runs, admission, stages, comparisons, ceilings.

``text_report`` is what ``ragtime bench load`` prints; BENCHMARKS.md shows the same tables.
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.harness.results import BenchResult, Ceiling, Comparison, Run
from bench.harness.stats import Summary


def _ms(summary: Summary, *fields: str) -> str:
    return " / ".join(summary.fmt(f) for f in fields)


def runs_table(runs: Sequence[Run]) -> str:
    rows = [
        "| target | load | n (ok/sent) | first evidence p50 / p95 ms | TTFT p50 / p95 / p99 ms "
        "| ITL p50 / p99 ms | e2e p50 / p95 / p99 ms | answered req/s | errors | within budget "
        "| degradations |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in runs:
        s = run.summary
        degraded = ", ".join(f"{k} {v}" for k, v in s.degradations.items()) or "none"
        ttft, e2e = _ms(s.ttft_ms, "p50", "p95", "p99"), _ms(s.e2e_ms, "p50", "p95", "p99")
        rows.append(
            f"| {run.target} | {run.load} | {s.ok}/{s.requests} "
            f"| {_ms(s.evidence_ms, 'p50', 'p95')} | {ttft} "
            f"| {_ms(s.itl_ms, 'p50', 'p99')} (n={s.itl_ms.n}) | {e2e} "
            f"| {s.throughput_rps:.1f} | {s.error_ratio:.1%} | {s.within_budget_ratio:.1%} "
            f"| {degraded} |"
        )
    return "\n".join(rows)


def admission_table(runs: Sequence[Run]) -> str:
    """Admission control at each load: what was admitted and how it fared, what was refused
    and how fast; empty when no run had a refusal."""
    if not any(r.summary.refused for r in runs):
        return ""
    rows = [
        "| target | load | admitted | refused | refusal p50 / p99 ms | admitted e2e p99 ms "
        "| useful answers/s | 504s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in runs:
        s = run.summary
        admitted = s.requests - s.refused
        rows.append(
            f"| {run.target} | {run.load} | {admitted} | {s.refused} "
            f"| {_ms(s.refused_ms, 'p50', 'p99')} | {s.e2e_ms.fmt('p99')} "
            f"| {s.useful_rps:.1f} | {s.statuses.get('504', 0)} |"
        )
    return "\n".join(rows)


def stages_table(runs: Sequence[Run]) -> str:
    shown = [r for r in runs if r.summary.stages_ms]
    if not shown:
        return ""
    stages: list[str] = []
    for run in shown:
        stages += [s for s in run.summary.stages_ms if s not in stages]
    rows = [
        "| target | load | n | " + " | ".join(stages) + " |",
        "| --- | --- | --- |" + " --- |" * len(stages),
    ]
    for run in shown:
        cells = [
            run.summary.stages_ms[s].fmt("p50", 2) if s in run.summary.stages_ms else "n/a"
            for s in stages
        ]
        rows.append(f"| {run.target} | {run.load} | {run.summary.ok} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def comparisons_table(comparisons: Sequence[Comparison]) -> str:
    rows = [
        "| load | baseline | other | metric | baseline ms | other ms | difference ms | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in comparisons:
        for metric, deltas in (("TTFT", c.ttft_ms), ("e2e", c.e2e_ms)):
            for field, d in deltas.items():
                rows.append(
                    f"| {c.load} | {c.baseline} | {c.other} | {metric} {field} "
                    f"| {fmt_number(d.baseline)} | {fmt_number(d.other)} "
                    f"| {fmt_number(d.diff, 2)} | {fmt_number(d.ratio, 2)}x |"
                )
    return "\n".join(rows)


def ceilings_table(ceilings: Sequence[Ceiling]) -> str:
    rows = [
        "| target | TTFT p99 at lowest rate | limit (2x) | ceiling (highest rate that held) "
        "| first rate that did not | why |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in ceilings:
        rows.append(
            f"| {c.target} | {fmt_number(c.baseline_ttft_p99_ms)} ms at {c.baseline_rate:g} req/s "
            f"| {fmt_number(c.limit_ttft_p99_ms)} ms | {_rate(c.ceiling_rps)} "
            f"| {_rate(c.first_failing_rps)} | {c.reason} |"
        )
    return "\n".join(rows)


def fmt_number(value: float | None, digits: int = 1) -> str:
    """A figure to ``digits`` decimals, or ``n/a``: how every table shows a missing one."""
    return "n/a" if value is None else f"{value:.{digits}f}"


def _rate(value: float | None) -> str:
    return "none" if value is None else f"{value:g} req/s"


def text_report(result: BenchResult) -> str:
    """What ``ragtime bench load`` prints: the tables of its run."""
    parts = [runs_table(result.runs)]
    if admitted := admission_table(result.runs):
        parts.append("Admission control:\n" + admitted)
    if stages := stages_table(result.runs):
        parts.append("Median server-reported stage times (ms):\n" + stages)
    if result.comparisons:
        parts.append(comparisons_table(result.comparisons))
    if result.ceilings:
        parts.append(ceilings_table(result.ceilings))
    return "\n\n".join(parts)
