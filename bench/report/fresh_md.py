"""BENCHMARKS.md's block on a fresh process's first requests, written from the JSON file of
``ragtime bench budget --fresh-starts`` (``ragtime bench section --fresh``), between its own
markers."""

from __future__ import annotations

from pathlib import Path

from bench.harness.outcomes import USEFUL_WORDS
from bench.report.budget_md import splice
from bench.suites.budget.fresh import FreshResult, starts_table, table

BEGIN = "<!-- fresh-start: written by `ragtime bench section --fresh` -->"
END = "<!-- /fresh-start -->"


def section(result: FreshResult) -> str:
    """The block of BENCHMARKS.md, markers included."""
    n_starts = max((len(s.starts) for s in result.servers), default=0)
    order = ",".join(str(n) for n in result.order)
    m = result.machine
    parts = [
        f"## 7. A fresh process: its first {len(result.order)} requests at "
        f"{result.budget_ms / 1000:g} s",
        f"`{result.command}` ({result.created})",
        f"Each server kind was started afresh {n_starts} times (a new `ragtime serve` process "
        "each time, the kinds taking turns; a simulated SGLang server, when there is one, is "
        "new each time too, with an empty prefix cache). As soon as a process answered "
        f"`/readyz` with 200 it got its first {len(result.order)} `/v1/ask` requests, one "
        f"after another, each with `budget_ms` {result.budget_ms}: questions {order} of the "
        "question file (with repeats). **Useful**: HTTP 200 whose answer has at least "
        f"{USEFUL_WORDS} words and came back within the budget "
        "(`bench.harness.outcomes.is_useful`, "
        "as in section 6). **Within budget**: an answer or a 504 within the budget. e2e is the "
        "client's, of every response (504s included); TTFT of the answered. *Ready after*: "
        "from spawning the process to its first `/readyz` 200 (the client polls every 0.2 s).",
        table(result),
        "Per start:",
        starts_table(result),
        f"Machine: {m.get('cores')} cores, {m.get('cpu_model')}; load average (1, 5, 15 min) "
        f"{m.get('loadavg_at_start')} at the start, {m.get('loadavg_at_end')} at the end. "
        "The client runs on the same cores as the servers.",
        *result.notes,
    ]
    return BEGIN + "\n" + "\n\n".join(parts) + "\n" + END


def write_section(out: Path, result: FreshResult) -> None:
    text = out.read_text() if out.exists() else ""
    out.write_text(splice(text, section(result), begin=BEGIN, end=END))
