"""The figures the README and the manual's pages (``docs/``) quote come from the tables ``make
bench`` writes into BENCHMARKS.md (issue 42 §4): the Targets table, whose rows
``benchmarks/targets.json`` names, and section 13's table of issue 60's goals, whose rows name
themselves (`` `peers_cpu_vs_floor` ``). Each quoted figure stands right after a marker naming its
row (``<!-- figure:cpu_ttft_p50 -->549 ms``), and must read as that row's "now" cell does. Every
page that holds a marker is read."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The pages that must quote figures; any other page of docs/ with a marker is read too.
MUST_QUOTE = ("README.md", "docs/scaling.md", "docs/serving.md")
QUOTING = tuple(
    sorted(
        {*MUST_QUOTE}
        | {
            page.relative_to(ROOT).as_posix()
            for page in (ROOT / "docs").rglob("*.md")
            if "<!-- figure:" in page.read_text()
        }
    )
)
MARKED = re.compile(r"<!-- figure:(\w+) -->([+\-]?[\d.,]+ ?(?:ms|req/s|%|x))")
#: A row of section 13's goals: its measure, its id in backticks, its "now" cell.
GOAL_ROW = re.compile(r"^\| [^|]+ \| `(\w+)` \| ([^|]+) \|", re.M)


def measured_now() -> dict[str, str]:
    """Each target's figure in BENCHMARKS.md's Targets table, by its id in targets.json."""
    ids = {
        row["measure"]: row["id"]
        for row in json.loads((ROOT / "benchmarks/targets.json").read_text())["rows"]
    }
    text = (ROOT / "BENCHMARKS.md").read_text()
    table = text[text.index("## Targets: this run against the previous one") :]
    now = {}
    for line in table.splitlines()[1:]:
        if line.startswith("## "):
            break
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if len(cells) >= 3 and cells[0] in ids:
            now[ids[cells[0]]] = cells[2]
    now.update({row_id: cell.strip() for row_id, cell in GOAL_ROW.findall(text)})
    return now


@pytest.mark.parametrize("name", QUOTING)
def test_each_quoted_figure_is_what_benchmarks_md_says_now(name: str) -> None:
    now = measured_now()
    quoted = MARKED.findall((ROOT / name).read_text())
    assert quoted, f"{name} quotes no figure"
    wrong = [
        f"{figure_id}: {value!r}, BENCHMARKS.md says {now.get(figure_id)!r}"
        for figure_id, value in quoted
        if now.get(figure_id) != value
    ]
    assert not wrong, wrong


def test_every_marker_is_read() -> None:
    """A marker the pattern cannot read (a figure without its unit) would escape the check."""
    for name in QUOTING:
        text = (ROOT / name).read_text()
        assert text.count("<!-- figure:") == len(MARKED.findall(text)), name
