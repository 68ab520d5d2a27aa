"""BENCHMARKS.md's section on ragtime's ceiling against the floor's by a compiled load generator
(issue 44 §3), written from the JSON file of ``ragtime bench ceiling`` (``ragtime bench section
--ceiling``), between its own markers: the targets with each run's figure, the median and the
spread; each run's ceilings; the low-rate TTFT pairs; every rate's p99; and, from the JSON files
of the bench's own client (``--client-ceiling``), the ceilings that client found."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.harness.results import BenchResult, point_holds
from bench.report.budget_md import splice
from bench.suites.ceiling.results import (
    TARGET_EXTRA_MS,
    TARGET_RATIO,
    CeilingBench,
    CeilingRun,
    Spread,
    Sweep,
    met,
    stages_p50,
)
from bench.suites.ceiling.wrk import CONNECTION_WINDOW_S, MIN_CONNECTIONS

BEGIN = "<!-- ceiling-compiled: written by `ragtime bench section --ceiling` -->"
END = "<!-- /ceiling-compiled -->"
TITLE = "## 9. The ceiling as a share of the floor's, by a compiled load generator"


def _num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _rps(value: float | None) -> str:
    return "none held" if value is None else f"{value:g} req/s"


def _met(value: bool | None) -> str:
    return {True: "met", False: "**missed**", None: "n/a"}[value]


def _spread(value: Spread | None, fmt: str) -> str:
    if value is None:
        return "n/a"
    return f"{fmt.format(value.median)} ({fmt.format(value.min)} to {fmt.format(value.max)})"


def _extra(run: CeilingRun, questions: str) -> str:
    pair = next((p for p in run.low_rate if p.questions == questions), None)
    return "n/a" if pair is None or pair.extra_ms is None else f"{pair.extra_ms:+.1f} ms"


def targets_table(bench: CeilingBench) -> list[str]:
    """Each target: every run's figure, the median and the spread, the target, met."""
    verdict = met(bench)
    runs = bench.runs
    head = "| measure | " + " | ".join(f"run {r.number}" for r in runs)
    lines = [
        head + " | median (lowest to highest) | target | met |",
        "| --- |" + " --- |" * len(runs) + " --- | --- | --- |",
    ]
    ratio_cells = [
        f"{_num(r.ratio, 2)} ({_rps(r.ragtime.ceiling.ceiling_rps)} / "
        f"{_rps(r.floor.ceiling.ceiling_rps)})"
        for r in runs
    ]
    rows = [
        ("ragtime's ceiling / the floor's (ragtime / floor)", ratio_cells,
         _spread(bench.ratio, "{:.2f}"), f">= {TARGET_RATIO:g}", verdict["ratio"]),
        ("ragtime's TTFT p50 over the floor's, questions never asked before",
         [_extra(r, "fresh") for r in runs], _spread(bench.fresh_extra_ms, "{:+.1f} ms"),
         f"<= +{TARGET_EXTRA_MS:g} ms", verdict["fresh"]),
        ("ragtime's TTFT p50 over the floor's, one question repeated",
         [_extra(r, "repeats") for r in runs], _spread(bench.repeats_extra_ms, "{:+.1f} ms"),
         f"<= +{TARGET_EXTRA_MS:g} ms", verdict["repeats"]),
    ]  # fmt: skip
    for measure, cells, median, target, ok in rows:
        row = [measure, *cells, median, target, _met(ok)]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _sweep_cells(sweep: Sweep) -> str:
    c = sweep.ceiling
    first = "" if c.first_failing_rps is None else f", failed at {c.first_failing_rps:g}"
    return (
        f"{_rps(c.ceiling_rps)}{first} | {_num(c.baseline_ttft_p99_ms)} ms at "
        f"{c.baseline_rate:g} req/s ({_num(c.limit_ttft_p99_ms)} ms)"
    )


def cpu_at_ceiling(sweep: Sweep) -> str:
    """The server's CPU per response at the highest rate that held (else the lowest rate)."""
    rate = sweep.ceiling.ceiling_rps or sweep.ceiling.baseline_rate
    phase = next((p for p in sweep.phases if p.rate == rate), None)
    if phase is None or phase.server_cpu_ms is None:
        return "n/a"
    return f"{phase.server_cpu_ms:.1f} at {rate:g}"


def runs_table(bench: CeilingBench) -> list[str]:
    lines = [
        "| run | floor: ceiling | floor: p99 at the lowest rate (limit) | ragtime: ceiling | "
        "ragtime: p99 at the lowest rate (limit) | ratio | server CPU ms per response at the "
        "ceiling (req/s), floor / ragtime | load average, start -> end |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in bench.runs:
        load = " -> ".join(str(x) for x in r.loadavg)
        cpu = f"{cpu_at_ceiling(r.floor)} / {cpu_at_ceiling(r.ragtime)}"
        lines.append(
            f"| {r.number} | {_sweep_cells(r.floor)} | {_sweep_cells(r.ragtime)} | "
            f"{_num(r.ratio, 2)} | {cpu} | {load} |"
        )
    return lines


def stages_table(bench: CeilingBench) -> list[str]:
    """ragtime's stages by its own timings, p50 (median across runs), fresh against repeated."""
    fresh, repeats = stages_p50(bench.runs, "fresh"), stages_p50(bench.runs, "repeats")
    if not fresh and not repeats:
        return []
    lines = [
        "| ragtime's stage (its own timings) | never asked before, p50 ms | "
        "one, repeated, p50 ms |",
        "| --- | --- | --- |",
    ]
    for stage in sorted(set(fresh) | set(repeats)):
        lines.append(f"| {stage} | {_num(fresh.get(stage), 2)} | {_num(repeats.get(stage), 2)} |")
    return lines


def low_rate_table(bench: CeilingBench) -> list[str]:
    lines = [
        "| run | questions | floor TTFT p50 ms | ragtime TTFT p50 ms | over the floor | floor e2e "
        "p50 ms | ragtime e2e p50 ms | n (floor / ragtime) | errors |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in bench.runs:
        for p in r.low_rate:
            kind = "never asked before" if p.questions == "fresh" else "one, repeated"
            lines.append(
                f"| {r.number} | {kind} | {_num(p.floor_ttft_p50_ms, 2)} | "
                f"{_num(p.ragtime_ttft_p50_ms, 2)} | {_extra(r, p.questions)} | "
                f"{_num(p.floor_e2e_p50_ms, 2)} | {_num(p.ragtime_e2e_p50_ms, 2)} | "
                f"{p.n_floor} / {p.n_ragtime} | {p.errors} |"
            )
    return lines


def rates_table(bench: CeilingBench) -> list[str]:
    """Every rate's whole-response p99 (ms), floor / ragtime, per run; bold where it failed."""
    head = "| rate | " + " | ".join(f"run {r.number}: floor / ragtime" for r in bench.runs)
    lines = [head + " |", "| --- |" + " --- |" * len(bench.runs)]
    for rate in bench.rates:
        cells = []
        for r in bench.runs:
            pair = []
            for sweep in (r.floor, r.ragtime):
                phase = next((p for p in sweep.phases if p.rate == rate), None)
                if phase is None:
                    pair.append("-")
                    continue
                text = _num(phase.latency_ms.p99)
                if phase.late:
                    text += f" ({phase.late} late)"
                limit = sweep.ceiling.limit_ttft_p99_ms
                held = point_holds(phase.latency_ms.p99, phase.error_ratio, limit)
                failed = rate != sweep.ceiling.baseline_rate and not held
                pair.append(f"**{text}**" if failed else text)
            cells.append(" / ".join(pair))
        if any(c != "- / -" for c in cells):
            lines.append(f"| {rate:g} | " + " | ".join(cells) + " |")
    return lines


def client_lines(client: Sequence[BenchResult]) -> list[str]:
    """The ceilings the bench's own client found, from its JSON files."""
    out = []
    for result in client:
        for c in result.ceilings:
            out.append(
                f"- `{result.command}` ({result.created}): {c.target} {_rps(c.ceiling_rps)} "
                f"(TTFT p99 {_num(c.baseline_ttft_p99_ms)} ms at {c.baseline_rate:g} req/s)."
            )
    return out


def section(bench: CeilingBench, client: Sequence[BenchResult] = ()) -> str:
    """The block of BENCHMARKS.md, markers included."""
    w, m = bench.workers, bench.machine
    method = (
        f"{bench.generator} (Debian's `wrk`) drives both servers through its LuaJIT scripting "
        "(`bench/suites/ceiling/open_loop.lua`): Poisson arrivals at each rate on one wrk thread, "
        f"over connections enough for {CONNECTION_WINDOW_S:g} s of arrivals (at least "
        f"{MIN_CONNECTIONS}), opened before the arrivals begin; an arrival that finds every "
        "connection busy leaves as soon as one frees and is counted late. The bench's demo "
        "questions are sent in turn. The floor (`bench.harness.floor`: FastAPI, uvicorn and "
        f"sse-starlette streaming {bench.floor_tokens} tokens, one process) and ragtime "
        f"(`{bench.config_path}`) take turns rate by rate. wrk times the whole response, from "
        "writing the request to its last byte; it has no hook at the first byte (`hey` times "
        "the first byte, but sends one body for all requests and starts its paced workers "
        "together; `h2load` times whole responses too). So a ceiling here is the highest rate "
        "whose whole-response p99 stayed under twice its value at the lowest rate, with at most "
        "1% errors (a response other than a 200 ending in `done` is one); a target leaves its "
        "sweep after two failing rates in a row. Server CPU is what the server's processes used "
        "during a phase (Linux's /proc), per complete response, idle work included. Each rate "
        f"ran {bench.seconds:g} s or "
        f"{bench.min_requests} requests, whichever took longer. Example phase: "
        f"`{bench.generator_command}`."
    )
    low = (
        f"TTFT p50 at {bench.low_rate:g} req/s ({bench.low_requests} requests each, Poisson "
        "arrivals, the two servers taking turns) is the bench's own client's "
        "(`bench.harness.client`), which reads the first `token` event; wrk cannot. *Never asked "
        "before*: each request a numbered variant of a bench question, so no cache of ragtime's "
        "helps; *repeated*: the first bench question every time. The e2e columns show what "
        "follows the first token, which wrk's whole-response latency counts: ragtime attributes "
        "the answer's sentences to the passages and sends its report in the `done` event."
    )
    workers = (
        f"ragtime served with `RAGTIME_WORKERS={w.setting}`: {w.resolved} processes on this "
        f"machine's {w.cores} cores. `auto` starts one process per usable core, at most "
        f"{w.auto_max} (`app/settings/serve.py`), for the null backend and any other that does "
        "not run its model in the process (one process with the in-process llama.cpp backend, "
        "or with per-key rate limits kept in process): 1 on 1 core, 2 on 2, 3 on 3, "
        f"{w.auto_max} on {w.auto_max} cores or more. Only {w.cores} cores were measured here; "
        "what more processes give on more cores is not measured. The floor is one process on "
        "any machine."
    )
    parts = [
        TITLE,
        f"`{bench.command}` ({bench.created})",
        method,
        "\n".join(targets_table(bench)),
        "Each run's ceilings:",
        "\n".join(runs_table(bench)),
        low,
        "\n".join(low_rate_table(bench)),
        "\n".join(stages_table(bench)),
        "Whole-response p99 (ms) at each rate, floor / ragtime; **bold**: the rate failed the "
        "rule; - : not run (the target had left the sweep).",
        "\n".join(rates_table(bench)),
        workers,
    ]
    found = client_lines(client)
    if found:
        parts += [
            "The ceilings the bench's own Python client found (`ragtime bench load "
            "--rates`, as section 3 runs it), whose TTFT rule reads the first token; it shares the "
            "cores with the servers and its own asyncio loop paces the arrivals:",
            "\n".join(found),
        ]
    parts.append(
        f"Machine: {m.get('cores')} cores, {m.get('cpu_model')}; load average (1, 5, 15 min) "
        f"{m.get('loadavg_at_start')} at the start, {m.get('loadavg_at_end')} at the end. wrk "
        "and the bench's client run on the same cores as the servers."
    )
    parts += bench.notes
    return BEGIN + "\n" + "\n\n".join(p for p in parts if p) + "\n" + END


def write_section(out: Path, bench: CeilingBench, client: Sequence[BenchResult] = ()) -> None:
    text = out.read_text() if out.exists() else ""
    out.write_text(splice(text, section(bench, client), begin=BEGIN, end=END))
