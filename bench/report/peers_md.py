"""BENCHMARKS.md's section on the references (issue 60 §3): ragtime beside the same-work floor
and the Haystack peer, written from a ``ragtime bench peers`` JSON file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.report.budget_md import splice
from bench.suites.ceiling.results import Spread
from bench.suites.peers.results import FLOOR, PEER, RAGTIME, PeersBench, users_label

BEGIN = "<!-- peers: written by `ragtime bench section --peers` -->"
END = "<!-- /peers -->"
TITLE = "## 13. The references: the same-work floor and a Haystack peer"
ABOUT = (
    "ragtime against what the same work costs without its machinery, and against what a user "
    "would build instead, in one run with the same clients. The *same-work floor* "
    "(`python -m bench.harness.floor --same-work`) does per request what a question inherently "
    "costs with ragtime's own library calls (the question screen, the ONNX embedding, the FAISS "
    "and BM25 searches over the same stored collection, the prompt) and none of its machinery "
    "(no budget, admission, spans, metrics or caches). The *Haystack peer* "
    "(`bench/peers/haystack_app.py`) is the tutorials' hybrid RAG pipeline (BM25 and embedding "
    "retrievers fused by reciprocal rank, the same MiniLM files on torch) over the demo corpus, "
    "chunks and top-k sized so that its prompt holds about as many tokens as ragtime's; it "
    "does not screen, redact, weigh its evidence, attribute or trace. Generation is null (each "
    "streams the same filler tokens). Every request asks a question never asked before. Closed "
    "loops by the bench's own client (httpx, in the bench's process, on the same cores); "
    "ceilings by wrk, as in section 9. CPU per request is what each server's processes used, "
    "read from /proc. A ceiling is the highest rate whose p99 stayed under twice its value at the "
    "lowest rate (section 9's rule); the most answers/s in the sweep is beside it. Each cell: "
    "the median across runs (lowest-highest)."
)
NAMES = {RAGTIME: "ragtime", FLOOR: "same-work floor", PEER: "Haystack"}
LABELS = {
    "ttft_p50_ms": "first token p50, ms",
    "e2e_p50_ms": "whole answer p50, ms",
    "throughput_rps": "answers/s (closed loop)",
    "cpu_ms_per_request": "server CPU per request, ms",
    "ceiling_rps": "ceiling by wrk, req/s",
    "ceiling_cpu_ms": "server CPU per response at its ceiling, ms",
    "peak_rps": "most answers/s in the sweep",
}


def _cell(value: Spread | None) -> str:
    if value is None:
        return "n/a"
    if len(value.values) == 1:
        return f"{value.median:.3g}"
    return f"{value.median:.3g} ({value.min:.3g}-{value.max:.3g})"


def table(bench: PeersBench) -> list[str]:
    targets = list(dict.fromkeys(f.target for f in bench.figures))
    lines = [
        "| | " + " | ".join(NAMES.get(t, t) for t in targets) + " |",
        "| --- |" + " --- |" * len(targets),
    ]
    rows: dict[tuple[str, int | None], dict[str, Spread | None]] = {}
    for figure in bench.figures:
        rows.setdefault((figure.measure, figure.users), {})[figure.target] = figure.spread
    for (measure, users), cells in rows.items():
        label = LABELS[measure] + (f", {users_label(users)}" if users else "")
        lines.append(f"| {label} | " + " | ".join(_cell(cells.get(t)) for t in targets) + " |")
    return lines


@dataclass(frozen=True)
class Goal:
    """One of issue 60's goals, as this run measured it: ragtime's figure against a reference."""

    id: str
    measure: str
    unit: str  # "x" (a ratio) or "+ms" (a difference)
    better: str  # "lower" or "higher"
    goal: float


GOALS = (
    Goal("peers_cpu_vs_floor", "server CPU per request, most users: ragtime / same-work floor",
         "x", "lower", 1.5),
    Goal("peers_ceiling_vs_floor", "ceiling by wrk: ragtime / same-work floor", "x", "higher", 0.7),
    Goal("peers_ceiling_vs_haystack", "ceiling by wrk: ragtime / Haystack", "x", "higher", 3.0),
    Goal("peers_ttft_over_floor", "first token p50, 1 user: ragtime less the same-work floor",
         "+ms", "lower", 3.0),
)  # fmt: skip


def _median(bench: PeersBench, target: str, users: int | None, measure: str) -> float | None:
    figure = next(
        (f for f in bench.figures if (f.target, f.users, f.measure) == (target, users, measure)),
        None,
    )
    return figure.spread.median if figure is not None and figure.spread is not None else None


def _ratio_median(bench: PeersBench, name: str) -> float | None:
    ratio = next((r for r in bench.ratios if r.name == name), None)
    return ratio.spread.median if ratio is not None and ratio.spread is not None else None


def goal_values(bench: PeersBench) -> dict[str, float | None]:
    """Each goal's figure in this run: ratios are the median of the run-by-run ratios; the first
    token's difference is that of the medians."""
    most = max(bench.users) if bench.users else None
    ours, floor = (_median(bench, t, 1, "ttft_p50_ms") for t in (RAGTIME, FLOOR))
    return {
        "peers_cpu_vs_floor": _ratio_median(
            bench, f"cpu_ms_per_request, {users_label(most)}, ragtime / {FLOOR}" if most else ""
        ),
        "peers_ceiling_vs_floor": _ratio_median(bench, f"ceiling, ragtime / {FLOOR}"),
        "peers_ceiling_vs_haystack": _ratio_median(bench, f"ceiling, ragtime / {PEER}"),
        "peers_ttft_over_floor": None if ours is None or floor is None else ours - floor,
    }


def _shown(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2f}x" if unit == "x" else f"{value:+.1f} ms"


def goals_table(bench: PeersBench) -> list[str]:
    """Issue 60's goals, a row each: the README and the manual quote the "now" cell by its id
    (``tests/test_figures.py``)."""
    values = goal_values(bench)
    lines = ["| goal | id | now | wanted | met |", "| --- | --- | --- | --- | --- |"]
    for goal in GOALS:
        value = values[goal.id]
        bound = "at most" if goal.better == "lower" else "at least"
        met = "n/a"
        if value is not None:
            ok = value <= goal.goal if goal.better == "lower" else value >= goal.goal
            met = "met" if ok else "NOT met"
        lines.append(
            f"| {goal.measure} | `{goal.id}` | {_shown(value, goal.unit)} | {bound} "
            f"{_shown(goal.goal, goal.unit)} | {met} |"
        )
    return lines


def section(bench: PeersBench) -> str:
    ratios = [f"- {r.name}: {_cell(r.spread)}" for r in bench.ratios]
    setup = (
        f"{len(bench.runs)} runs; ragtime and the floor with {bench.workers.resolved} processes "
        f"on {bench.workers.cores} cores; {bench.tokens} tokens an answer; {bench.requests} "
        f"requests per closed loop; the peer: "
        + ", ".join(f"{k} {v}" for k, v in bench.peer.items() if k != "python")
        + f"; load average at the end {bench.machine.get('loadavg_at_end')}. Made "
        f"{bench.created[:10]} by `{bench.command}`."
    )
    parts = [
        *(BEGIN, TITLE, "", ABOUT, "", setup, "", *table(bench), ""),
        *("Issue 60's goals, this run:", "", *goals_table(bench), ""),
        *("Ratios, run by run:", ""),
    ]
    return "\n".join([*parts, *ratios, *(f"- {n}" for n in bench.notes), END])


def read_peers_json(path: Path) -> PeersBench:
    return PeersBench.model_validate_json(path.read_text())


def write_section(out: Path, bench: PeersBench) -> None:
    text = out.read_text() if out.exists() else ""
    out.write_text(splice(text, section(bench), begin=BEGIN, end=END))
