"""BENCHMARKS.md's section on the answers themselves, by answer mode and budget, written from the
JSON files of ``ragtime bench answers`` (or ``ragtime eval answers``): one block a labelled set,
its two tables as ``app.evaluation.report.markdown`` writes them."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.evaluation.report import Row, markdown
from bench.report.budget_md import splice

BEGIN = "<!-- answers: written by `ragtime bench section --answers` -->"
END = "<!-- /answers -->"
TITLE = "## 12. Answers by mode and budget"
ABOUT = (
    "Each labelled set of `demo/answers` asked one question at a time, in each answer mode at "
    "each budget: *generate* (the model writes the answer), *extract* (the stretch of one "
    "passage that best answers, no model), *auto* (generate, falling back to extract when "
    "generation does not fit the budget or its answer is not borne out). The rules are "
    "app/evaluation/scoring.py's: key facts held, citations against the labels, refusals in "
    "words and abstentions by the server's `answerable` verdict, grounded precision (of the "
    "answers marked grounded, the share right) and recall (of the right answers, the share "
    "marked grounded), and loops (an answer that repeats itself, or ran to its token cap though "
    'the budget did not cap it). "Written by" counts the mode that wrote each answer, as the '
    "server reports it. The timings are the client's, one question at a time."
)


def read_answers_json(path: Path) -> dict[str, Any]:
    record = json.loads(path.read_text())
    if not (
        isinstance(record, dict)
        and str(record.get("schema_version", "")).startswith("ragtime-eval-answers/")
        and isinstance(record.get("runs"), list)
    ):
        raise ValueError(f"{path}: not a `ragtime eval answers` result")
    return record


def _kinds(record: dict[str, Any]) -> str:
    """``"43 answerable, 12 unanswerable, 10 planted"``, from the first run's answers."""
    answers = record["runs"][0]["answers"] if record["runs"] else []
    counts = Counter(str(a.get("kind")) for a in answers)
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def block(record: dict[str, Any]) -> str:
    """One set's heading, the command that asked it, and its two tables."""
    rows = [Row.model_validate(run["row"]) for run in record["runs"]]
    models = sorted({m for r in rows for m in r.models})
    return "\n".join(
        [
            f"### {record['dataset']}",
            "",
            f"`{record['command']}` ({record['when']}): {record['questions']} questions "
            f"({_kinds(record)}), into the collection `{record['collection']}`; models: "
            f"{', '.join(models) or 'none answered'}.",
            "",
            markdown(rows),
        ]
    )


def section(records: Sequence[dict[str, Any]]) -> str:
    return "\n".join([BEGIN, TITLE, "", ABOUT, "", *(block(r) + "\n" for r in records), END])


def write_section(out: Path, records: Sequence[dict[str, Any]]) -> None:
    text = out.read_text() if out.exists() else ""
    out.write_text(splice(text, section(records), begin=BEGIN, end=END))
