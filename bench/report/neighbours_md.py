"""BENCHMARKS.md's section on answers beside CPU-bound neighbours (issue 56), written from a
``ragtime bench neighbours`` JSON file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.report.budget_md import splice
from bench.suites.neighbours import report

BEGIN = "<!-- neighbours: written by `ragtime bench section --neighbours` -->"
END = "<!-- /neighbours -->"
TITLE = "## 11. A noisy neighbour: answers beside CPU-bound processes"
ABOUT = (
    "The CPU default where people run it: beside a browser, a build, another service. Two "
    "processes spin on this machine's two cores while the questions come one at a time, then "
    "they stop and the same count is asked quiet. An answer is *whole* when the model or its "
    "token cap ended it, not the deadline. The client is the bench's own (httpx, streamed, in "
    "the bench's process, on the same cores). What the neighbours cost and why is in "
    '"A noisy neighbour: llama.cpp\'s threads" below.'
)


def read_neighbours_json(path: Path) -> dict[str, Any]:
    result = json.loads(path.read_text())
    if not isinstance(result, dict) or "rows" not in result:
        raise ValueError(f"{path}: not a `ragtime bench neighbours` result")
    return result


def section(result: dict[str, Any]) -> str:
    return "\n".join([BEGIN, TITLE, "", ABOUT, "", report(result), END])


def write_section(out: Path, result: dict[str, Any]) -> None:
    text = out.read_text() if out.exists() else ""
    out.write_text(splice(text, section(result), begin=BEGIN, end=END))
