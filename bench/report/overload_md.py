"""BENCHMARKS.md's section on overload, a slowed engine and the engine's priority scheduling
(issue 44, sections 1 and 2), written from a ``ragtime bench overload`` JSON file."""

from __future__ import annotations

from pathlib import Path

from bench.report.budget_md import splice
from bench.suites.overload.report import markdown
from bench.suites.overload.results import OverloadBench

BEGIN = "<!-- overload: written by `ragtime bench section --overload` -->"
END = "<!-- /overload -->"
TITLE = "## 10. Overload, a slowed engine, and the engine's priority scheduling"


def read_overload_json(path: Path) -> OverloadBench:
    return OverloadBench.model_validate_json(path.read_text())


def section(bench: OverloadBench) -> str:
    return "\n".join([BEGIN, TITLE, "", markdown(bench), END])


def write_section(out: Path, bench: OverloadBench) -> None:
    text = out.read_text() if out.exists() else ""
    out.write_text(splice(text, section(bench), begin=BEGIN, end=END))
