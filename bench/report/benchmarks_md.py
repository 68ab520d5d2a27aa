"""BENCHMARKS.md, written from the JSON files of the runs that ``make bench`` makes.

Three kinds of run feed it: the CPU default on the demo corpus (closed loops of 1 and 2 users),
the null backend against the floor (ragtime's own overhead), and open-loop rate sweeps (the
ceilings: the null backend's, and the floor's for reference). Every figure carries its sample
count; every plot is regenerated from the JSON.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from bench.harness import plots
from bench.harness.results import BenchResult, Run
from bench.report.prefix_md import prefix_section, prefix_summary
from bench.report.tables import (
    ceilings_table,
    comparisons_table,
    fmt_number,
    runs_table,
    stages_table,
)
from bench.report.targets import measured, targets_section
from bench.suites.budget.faults import (
    TARGET_WITHIN_BUDGET,
    BudgetResult,
    cells_table,
    findings,
    policy_met,
)
from bench.suites.machinery.cost import machinery_line

#: Sections below this line are written by other commands (``ragtime eval``, the retrieval
#: bench, by hand with their commands); ``write_benchmarks`` keeps them as they are.
KEPT_MARK = "<!-- kept: the sections below are written by their own commands -->"


def kept_tail(out: Path) -> str:
    """What ``out`` holds from ``KEPT_MARK`` on (with the mark), or the mark alone."""
    text = out.read_text() if out.is_file() else ""
    at = text.find(KEPT_MARK)
    return "\n" + (text[at:] if at >= 0 else KEPT_MARK + "\n")


def write_benchmarks(
    out: Path,
    *,
    cpu: BenchResult,
    overhead: BenchResult,
    ceilings: Sequence[BenchResult],
    plot_dir: Path,
    setup_command: str,
    make_command: str = "make bench",
    budget: BudgetResult | None = None,
    prefix: BenchResult | None = None,
    prefix_fake: BenchResult | None = None,
    prefix_states: BenchResult | None = None,
    profile: Path | None = None,
) -> list[Path]:
    """Write ``out`` and its plots; the paths written (``budget`` adds its section, and
    ``prefix`` or ``prefix_fake`` the prefix-caching one). The targets table comes after the
    summary (``prefix_states`` adds the repeat-traffic row, ``profile`` the null-backend
    server's profile). What ``out`` holds below ``KEPT_MARK`` (sections other commands write)
    is kept as it is."""
    sweeps = [run for result in ceilings for run in result.runs]
    images = {
        "cpu-cdf": plots.latency_cdfs(cpu.runs, plot_dir / "cpu-latency-cdf.png",
                                      title="CPU default: latency CDFs"),
        "cpu-stages": plots.stage_breakdown(cpu.runs, plot_dir / "cpu-stages.png",
                                            title="CPU default: per-stage breakdown"),
        "overhead-cdf": plots.latency_cdfs(overhead.runs, plot_dir / "overhead-latency-cdf.png",
                                           title="ragtime (null backend) against the floor"),
        "overhead-stages": plots.stage_breakdown(overhead.runs, plot_dir / "overhead-stages.png",
                                                 title="ragtime (null backend): stages"),
        "ceiling": plots.ttft_vs_load(sweeps, plot_dir / "ttft-vs-load.png",
                                      title="TTFT against offered load (null backend, floor)"),
    }  # fmt: skip
    rel = {k: os.path.relpath(v, out.parent) for k, v in images.items()}
    text = "\n\n".join(
        [
            _header(cpu),
            _summary(cpu, overhead, ceilings)
            + _budget_summary(budget)
            + prefix_summary(prefix, prefix_fake),
            targets_section(
                measured(
                    cpu=cpu,
                    overhead=overhead,
                    ceilings=ceilings,
                    prefix=prefix,
                    prefix_states=prefix_states,
                ),
                profile=profile,
                prefix_states=prefix_states,
            ),
            _machine(
                {"CPU default": cpu, "overhead": overhead}
                | {f"ceiling {i + 1}": c for i, c in enumerate(ceilings)}
                | ({"prefix": prefix} if prefix is not None else {})
            ),
            _commands(
                make_command,
                setup_command,
                (
                    cpu,
                    overhead,
                    *ceilings,
                    *([prefix] if prefix is not None else []),
                    *([prefix_fake] if prefix_fake is not None else []),
                ),
                budget,
            ),
            _cpu_section(cpu, rel),
            _overhead_section(overhead, rel),
            _ceiling_section(ceilings, rel),
            *([_budget_section(budget)] if budget is not None else []),
            *(
                [prefix_section(prefix, prefix_fake, 5 if budget is not None else 4)]
                if prefix is not None or prefix_fake is not None
                else []
            ),
            _reading(),
        ]
    )
    out.write_text(text.rstrip() + "\n" + kept_tail(out))
    return [out, *images.values()]


def _header(first: BenchResult) -> str:
    return (
        "# ragtime benchmarks\n\n"
        f"Written by `make bench` ({first.created}); do not edit by hand, rerun it. Every latency "
        "is the client's (`ragtime bench load`): TTFT from the moment a request was due to its "
        "first `token` event, inter-token latency (ITL) between `token` events, end to end (e2e) "
        "to the `done` event. Stage times are the server's own `timings_ms`. Percentiles are "
        "numpy's (linear interpolation); `n` is the number of samples behind each figure."
    )


def _find(
    runs: Sequence[Run], *, target: str | None = None, users: int | None = None
) -> Run | None:
    for run in runs:
        if (target is None or run.target == target) and (users is None or run.users == users):
            return run
    return None


def _ragtime_target(result: BenchResult) -> str:
    return next(t.name for t in result.targets if t.kind != "floor")


def _floor_target(result: BenchResult) -> str | None:
    return next((t.name for t in result.targets if t.kind == "floor"), None)


def _summary(cpu: BenchResult, overhead: BenchResult, ceilings: Sequence[BenchResult]) -> str:
    lines = ["## Summary", ""]
    for users in (1, 2):
        run = _find(cpu.runs, users=users)
        if run is None:
            continue
        s = run.summary
        lines.append(
            f"- CPU default on the demo corpus, {run.load}: TTFT p50 {s.ttft_ms.fmt('p50', 0)} ms, "
            f"p95 {s.ttft_ms.fmt('p95', 0)} ms (n={s.ttft_ms.n}); end to end p50 "
            f"{s.e2e_ms.fmt('p50', 0)} ms, p95 {s.e2e_ms.fmt('p95', 0)} ms (n={s.e2e_ms.n}); "
            f"{s.within_budget_ratio:.0%} within budget, errors {s.error_ratio:.1%}"
            + _error_statuses(run)
            + "."
        )
    for c in overhead.comparisons:
        ttft, e2e = c.ttft_ms["p50"], c.e2e_ms["p50"]
        n = _find(overhead.runs, target=c.other)
        lines.append(
            f"- ragtime's own overhead ({c.other} against the {c.baseline}, {c.load}): TTFT p50 "
            f"+{fmt_number(ttft.diff, 2)} ms ({fmt_number(ttft.ratio, 1)}x the floor's "
            f"{fmt_number(ttft.baseline, 2)} ms), "
            f"e2e p50 +{fmt_number(e2e.diff, 2)} ms ({fmt_number(e2e.ratio, 1)}x), "
            f"n={n.summary.ttft_ms.n if n else 'n/a'} each."
        )
    for top in [c for r in ceilings for c in r.ceilings]:
        rps = "none of the swept rates" if top.ceiling_rps is None else f"{top.ceiling_rps:g} req/s"
        line = (
            f"- Ceiling of {top.target}: {rps} held TTFT p99 under twice its "
            f"{fmt_number(top.baseline_ttft_p99_ms)} ms at {top.baseline_rate:g} req/s"
            + (f"; it doubled by {top.first_failing_rps:g} req/s" if top.first_failing_rps else "")
            + "."
        )
        lines.append(line)
    return "\n".join(lines)


def _machine(results: dict[str, BenchResult]) -> str:
    first = next(iter(results.values()))
    m, v = first.machine, first.versions
    packages = ", ".join(f"{k} {val}" for k, val in v.items() if k not in ("commit", "python"))
    loads = "; ".join(
        f"{name} {r.machine.get('loadavg_at_start')} -> {r.machine.get('loadavg_at_end')}"
        for name, r in results.items()
    )
    return (
        "## Machine and versions\n\n"
        f"- {m.get('cores')} cores, {m.get('cpu_model')}, {m.get('memory_gib')} GiB, "
        f"{m.get('platform')}.\n"
        f"- Python {v.get('python')}, ragtime commit {v.get('commit')} (plus the working tree); "
        f"{packages}.\n"
        "- The load generator runs on the same cores as the servers (in its own process), so "
        "every figure includes the client's CPU use. The machine is shared and noisy; its load "
        f"average (1, 5, 15 min) at the start and end of each run: {loads}."
    )


def _commands(
    make: str,
    setup: str,
    results: Sequence[BenchResult],
    budget: BudgetResult | None = None,
    extra: Sequence[str] = (),
) -> str:
    configs: dict[str, dict[str, str]] = {}
    for result in results:
        for t in result.targets:
            if t.config_path:
                configs[t.config_path] = t.config
    if budget is not None:
        configs[budget.config_path] = budget.config
    body = [f"`{make}` ran, in order:", "", "```sh", setup]
    body += [r.command for r in results]
    body += [budget.command] if budget is not None else []
    body += [*extra, "```"]
    for path, values in configs.items():
        body += ["", f"`{path}`:", "", "```sh", *(f"{k}={v}" for k, v in values.items()), "```"]
    return "## Commands\n\n" + "\n".join(body)


def _cpu_section(cpu: BenchResult, rel: dict[str, str]) -> str:
    rows = [
        "| load | n | TTFT p50 ms | TTFT p95 ms | e2e p50 ms | e2e p95 ms | answered req/s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for run in cpu.runs:
        s = run.summary
        rows.append(
            f"| {run.load} | {s.ok} | {s.ttft_ms.fmt('p50', 0)} | {s.ttft_ms.fmt('p95', 0)} "
            f"| {s.e2e_ms.fmt('p50', 0)} | {s.e2e_ms.fmt('p95', 0)} | {s.throughput_rps:.2f} |"
        )
    return (
        "## 1. The CPU default on the demo corpus\n\n"
        "SmolLM2-135M-Instruct through llama.cpp, MiniLM embeddings, no reranker, the full demo "
        "corpus, the questions in `demo/questions.txt`; closed loops of 1 and 2 users.\n\n"
        + "\n".join(rows)
        + "\n\nAll figures:\n\n"
        + runs_table(cpu.runs)
        + "\n\nMedian stage times reported by the server (ms):\n\n"
        + stages_table(cpu.runs)
        + f"\n\n![CPU default latency CDFs]({rel['cpu-cdf']})\n\n"
        + f"![CPU default stages]({rel['cpu-stages']})"
    )


def _overhead_section(overhead: BenchResult, rel: dict[str, str]) -> str:
    floor = _floor_target(overhead) or "floor"
    return (
        "## 2. ragtime's own overhead, against the floor\n\n"
        f"`{floor}` is a bare FastAPI/uvicorn/sse-starlette endpoint (`bench.harness.floor`) that "
        "streams the same number of tokens with no work. "
        f"`{_ragtime_target(overhead)}` is the whole service with the null generation backend "
        "(`inference.NullBackend`): auth, moderation, embedding, search, prompt assembly, the "
        "answer filter and streaming, with no model. The two alternate round by round.\n\n"
        + comparisons_table(overhead.comparisons)
        + "\n\n"
        + runs_table(overhead.runs)
        + "\n\nMedian stage times reported by the server (ms):\n\n"
        + stages_table(overhead.runs)
        + f"\n\n![overhead latency CDFs]({rel['overhead-cdf']})\n\n"
        + f"![null backend stages]({rel['overhead-stages']})"
    )


def _kind(result: BenchResult, target: str) -> str:
    return next((t.kind for t in result.targets if t.name == target), "")


def _ceiling_section(ceilings: Sequence[BenchResult], rel: dict[str, str]) -> str:
    return (
        "## 3. The service's ceiling, apart from the model\n\n"
        "Open-loop Poisson arrivals at rising rates, swept for the null backend and, over the "
        "rates that suit it, for the floor (the ceiling of the bare stack with this client on "
        "this machine). The ceiling is the highest rate whose TTFT p99 stayed under twice its "
        "value at the lowest rate (with at most 1% errors); with `--stop-at-ceiling` a target "
        "leaves its sweep after two consecutive rates that fail. With 50 to 100 samples at the "
        "lowest rates a p99 is close to the largest sample, so one stall of this shared machine "
        "can fail a rate on its own: such isolated failures below a rate that held are listed, "
        "and the plot shows the whole curve.\n\n"
        + ceilings_table([c for r in ceilings for c in r.ceilings])
        + "\n\n"
        + runs_table([run for r in ceilings for run in r.runs])
        + f"\n\n![TTFT against offered load]({rel['ceiling']})"
    )


def _budget_summary(budget: BudgetResult | None) -> str:
    if budget is None:
        return ""
    lines = [""]
    for fault in budget.faults:
        on = [c for c in budget.cells if c.fault == fault.fault and c.policy]
        off = [c for c in budget.cells if c.fault == fault.fault and not c.policy]
        shares = "; ".join(
            f"{c.load}: on {c.answered_within_ratio:.0%}, off {o.answered_within_ratio:.0%} "
            f"(n={c.requests} each)"
            for c, o in zip(on, off, strict=False)
        )
        lines.append(
            f"- Answered within a {budget.budget_ms} ms budget, {fault.fault} fault "
            f"(+{fault.fault_ms:g} ms), policy on against off: {shares}."
        )
    met = "met" if policy_met(budget.cells) else "NOT met"
    lines.append(
        f"- Target at least {TARGET_WITHIN_BUDGET:.0%} answered within budget with the policy "
        f"on, under both faults: {met}."
    )
    if budget.machinery is not None:
        lines.append(f"- The {machinery_line(budget.machinery)}.")
    return "\n".join(lines)


def _budget_section(budget: BudgetResult) -> str:
    faults = ", ".join(f"`{f.variable}={f.fault_ms:g}`" for f in budget.faults)
    machinery = (
        f"\n\nThe {machinery_line(budget.machinery)}. Measured in the bench's own process "
        "(`bench.suites.machinery.cost`, no HTTP): one request's budget session over the "
        "service's budget engine, each stage through `session.run` (generation through "
        "`session.generate`) with its span charged, the cost model's observations, one "
        "degradation-policy plan, a degradation, the root span's annotation and the budget "
        "summary, with the real tracer provider (`tracing.configure_tracing()`) and metrics; "
        "requests whose trace is sampled alternate with requests whose trace is not (a "
        "`traceparent` ending `-00`, as the `parentbased_traceidratio` sampler leaves most); "
        "the stages themselves are empty."
        if budget.machinery is not None
        else ""
    )
    return (
        "## 4. The budget under faults: the degradation policy on and off\n\n"
        f"`ragtime bench budget` ({budget.created}) starts, for each fault ({faults}), two "
        f"servers from `{budget.config_path}`: `RAGTIME_DEGRADATION_POLICY=true` and `false`, "
        "both with a tiny random cross-encoder built at bench time "
        "(`bench.harness.tiny_cross_encoder`, not a quality model: it is there so that rerank runs "
        f"and its fault bites). Every request carries `budget_ms` {budget.budget_ms}; the two "
        "servers take turns round by round. Load: "
        + "; ".join(budget.loads)
        + " (the CPU default sustains about one request at a time on this 2-core machine, so "
        "1 user is 1x and 2 users is 2x). Answered within budget: HTTP 200 and the `done` "
        "event's `budget.exceeded` false. 504 within budget: failed, but within the budget "
        "(`failed_fast` in the JSON). Over budget: answered or failed after the budget ran "
        "out. Degradations are the actions in the answers' `degradations`, counted per action, "
        "with the number of answered requests that had any. Percentiles are over few samples "
        "(n in every cell): p95 and p99 are near the largest.\n\n"
        + cells_table(budget.cells)
        + "\n\n"
        + " ".join(findings(budget))
        + machinery
    )


def _reading() -> str:
    return (
        "## Reading these numbers\n\n"
        "- Open-loop latencies run from each request's scheduled arrival, so a client that falls "
        "behind cannot hide a queue; the client's own lateness is `start_lag_ms` in the JSON.\n"
        '- "Within budget" means answered in full with the end-to-end time inside the request\'s '
        "budget; the JSON also holds the server's own verdict (`budget_exceeded`).\n"
        "- The raw results, one record per request, are the JSON files under `bench-results/` "
        "(`ragtime bench load --json`); the schema is `bench.harness.results.BenchResult`."
    )


def _error_statuses(run: Run) -> str:
    """`` (HTTP 504: 2)`` for the failed requests of a run, or nothing."""
    failed = {k: v for k, v in run.summary.statuses.items() if k != "200"}
    streamed = run.summary.outcomes.get("stream_error", 0)
    parts = [f"HTTP {k}: {v}" for k, v in failed.items()]
    parts += [f"error events: {streamed}"] if streamed else []
    return f" ({', '.join(parts)})" if parts else ""
