"""The overload bench's verdicts, one row per target of issue 44 (sections 1 and 2), and its
report as text; ``markdown`` is the block ``ragtime bench section --overload`` writes into
BENCHMARKS.md."""

from __future__ import annotations

from pydantic import BaseModel

from bench.suites.overload.results import (
    TARGET_504_SHARE,
    TARGET_GOODPUT_LOSS,
    TARGET_GOODPUT_SHARE,
    TARGET_TIGHT_GAIN,
    TARGET_TIGHT_SHARE,
    OpenRun,
    Outcomes,
    OverloadBench,
)


class Verdict(BaseModel):
    target: str
    measured: str
    met: bool


def verdicts(bench: OverloadBench) -> list[Verdict]:
    """Each target the runs measured, and whether it was met."""
    out: list[Verdict] = []
    cap, over = bench.capacity, bench.overload
    if cap is not None and over is not None:
        share = over.goodput_rps / cap.rps if cap.rps else 0.0
        out.append(Verdict(
            target=f"overload {over.load:g}x: goodput >= {TARGET_GOODPUT_SHARE:.0%} of capacity",
            measured=f"{over.goodput_rps:.2f}/s of {cap.rps:.2f}/s ({share:.0%})",
            met=share >= TARGET_GOODPUT_SHARE,
        ))  # fmt: skip
        o = over.outcomes
        out.append(Verdict(
            target=f"overload {over.load:g}x: 504s after admission <= {TARGET_504_SHARE:.0%}",
            measured=f"{o.after_admission_504} of {o.admitted} admitted "
            f"({o.after_admission_504_share:.1%})",
            met=o.after_admission_504_share <= TARGET_504_SHARE,
        ))  # fmt: skip
        out.append(_none_late(f"overload {over.load:g}x", o))
    slow = bench.slowdown
    if slow is not None:
        slowed = slow.slowed_capacity.rps
        share = slow.goodput_after_rps / slowed if slowed else 0.0
        out.append(Verdict(
            target=f"engine {slow.factor:g}x slower: goodput after >= "
            f"{TARGET_GOODPUT_SHARE:.0%} of the slowed capacity",
            measured=f"{slow.goodput_after_rps:.2f}/s of {slowed:.2f}/s ({share:.0%})",
            met=share >= TARGET_GOODPUT_SHARE,
        ))  # fmt: skip
        out.append(_none_late(f"engine {slow.factor:g}x slower", slow.run.outcomes))
    off, on = bench.priority_off, bench.priority_on
    if off is not None and on is not None:
        tight = str(min(on.budgets_ms))
        before, after = _useful(off, tight), _useful(on, tight)
        out.append(Verdict(
            target=f"priority: the {tight} ms questions' useful share +"
            f"{TARGET_TIGHT_GAIN * 100:.0f} points or >= {TARGET_TIGHT_SHARE:.0%}",
            measured=f"{before:.0%} off, {after:.0%} on",
            met=after - before >= TARGET_TIGHT_GAIN or after >= TARGET_TIGHT_SHARE,
        ))  # fmt: skip
        loss = 1.0 - on.goodput_rps / off.goodput_rps if off.goodput_rps else 0.0
        out.append(Verdict(
            target=f"priority: goodput falls <= {TARGET_GOODPUT_LOSS:.0%}",
            measured=f"{off.goodput_rps:.2f}/s off, {on.goodput_rps:.2f}/s on ({-loss:+.0%})",
            met=loss <= TARGET_GOODPUT_LOSS,
        ))  # fmt: skip
        out.append(_none_late("priority off", off.outcomes))
        out.append(_none_late("priority on", on.outcomes))
    return out


def _useful(run: OpenRun, budget: str) -> float:
    part = run.by_budget.get(budget)
    return part.useful_share if part is not None else 0.0


def _none_late(label: str, o: Outcomes) -> Verdict:
    lag = f" ({o.sent_late} sent late by the client)" if o.sent_late else ""
    return Verdict(target=f"{label}: every request within budget",
                   measured=f"{o.late} of {o.sent} late on the wire{lag}",
                   met=o.late == 0)  # fmt: skip


def _row(label: str, o: Outcomes, goodput: float | None = None) -> str:
    rate = f" | {goodput:.2f}" if goodput is not None else " |"
    return (
        f"| {label} | {o.sent} | {o.useful} | {o.refused_at_arrival} | {o.after_admission_504} "
        f"| {o.late} | {o.other}{rate} | {o.ttft_ms.fmt()} | {o.e2e_ms.fmt()} |"
    )


def runs_table(bench: OverloadBench) -> list[str]:
    lines = [
        "| run | sent | useful | refused at arrival | 504 after admission | late | other "
        "| goodput /s | TTFT p50 ms | e2e p50 ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    if bench.capacity is not None:
        cap = bench.capacity
        lines.append(
            _row(f"capacity: {cap.users} users, {cap.budget_ms} ms", cap.outcomes, cap.rps)
        )
    runs = [bench.overload, bench.priority_off, bench.priority_on]
    if bench.slowdown is not None:
        slow = bench.slowdown
        runs.insert(1, slow.run)
        lines.append(_row("slowed capacity", slow.slowed_capacity.outcomes,
                          slow.slowed_capacity.rps))  # fmt: skip
    for run in runs:
        if run is None:
            continue
        lines.append(_row(f"{run.label} ({run.rate_rps:g}/s)", run.outcomes, run.goodput_rps))
        for budget, part in run.by_budget.items():
            lines.append(_row(f"  of which {budget} ms", part))
    if bench.slowdown is not None:
        slow = bench.slowdown
        lines.append(_row(f"  after the slowdown ({slow.at_s:g} s on)", slow.after,
                          slow.goodput_after_rps))  # fmt: skip
    return lines


def text_report(bench: OverloadBench) -> str:
    lines = [f"engine: {bench.engine} ({bench.slots} slots)", "", *runs_table(bench), ""]
    for verdict in verdicts(bench):
        lines.append(
            f"{'met   ' if verdict.met else 'MISSED'} {verdict.target}: {verdict.measured}"
        )
    return "\n".join(lines)


def markdown(bench: OverloadBench) -> str:
    """The block of BENCHMARKS.md: what ran, each run's outcomes, each target's verdict."""
    lines = [
        f"Made by `{bench.command}` ({bench.created}, commit "
        f"{bench.versions.get('commit', '?')}; {bench.machine.get('cores', '?')} cores). The "
        f"engine is the simulated SGLang server of `bench/sglang_sim` ({bench.engine}: "
        f"{bench.slots} slots, a waiting queue); the client is the bench's own (`httpx`, in the "
        "bench's process). Refused at arrival is the server's own count "
        "(`ragtime_admission_refused_total`).",
        "",
        *runs_table(bench),
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    for verdict in verdicts(bench):
        lines.append(
            f"| {verdict.target} | {verdict.measured} | {'yes' if verdict.met else 'no'} |"
        )
    return "\n".join(lines)
