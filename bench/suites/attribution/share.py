"""``ragtime bench attribution --url``: the share of a running server's answers that cite a
passage, by the model's own labels (all that ``cited`` meant before attribution) and at all;
with ``--save``, each answer as a JSON line too (its text and citations), to read afterwards."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Share:
    """Answers of a running server: how many cite a passage by the model's own labels
    (``by: model``, all that ``cited`` meant before attribution) and how many cite one at all."""

    answers: int
    by_model: int
    cited: int
    grounded_false: int
    skipped: int
    attribute_ms: list[float]


def questions_of(path: Path, limit: int) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [q.strip() for q in lines if q.strip() and not q.startswith("#")][:limit]


def citation_share(
    url: str,
    key: str,
    questions: Sequence[str],
    budget_ms: int | None = None,
    save: Path | None = None,
) -> Share:
    """Ask each question in turn (``POST /v1/ask``, whole answers, with ``budget_ms`` when
    given) and count; each answer's question, text and report appended to ``save`` when given."""
    import httpx

    by_model = cited = ungrounded = skipped = 0
    attribute_ms = []
    body: dict[str, object] = {} if budget_ms is None else {"budget_ms": budget_ms}
    with httpx.Client(base_url=url, timeout=(budget_ms or 120_000) / 1000 + 30) as client:
        for question in questions:
            response = client.post(
                "/v1/ask",
                json={"question": question, **body},
                headers={"Authorization": f"Bearer {key}"},
            )
            response.raise_for_status()
            answer = response.json()
            if save is not None:
                with save.open("a", encoding="utf-8") as out:
                    out.write(json.dumps({"question": question, **answer}) + "\n")
            marks = [c["by"] for c in answer["citations"] if c["cited"]]
            by_model += "model" in marks
            cited += bool(marks)
            ungrounded += answer["grounded"] is False
            skipped += answer["attribution"] == "skipped"
            if answer["attribution"] in ("attributed", "unattributed"):
                attribute_ms.append(answer["timings_ms"]["attribute"])
            print(  # one line per answer as it comes: a long run's partial figures
                f"{question[:50]!r}: {answer['finish_reason']}, citations "
                f"{answer['attribution']}, cited {cited_labels(answer)} by {marks}, grounded "
                f"{answer['grounded']}, {answer['budget']['spent_ms']:.0f} ms",
                file=sys.stderr,
                flush=True,
            )
    return Share(len(questions), by_model, cited, ungrounded, skipped, attribute_ms)


def cited_labels(answer: dict[str, Any]) -> list[int]:
    """The labels of the passages an answer cites."""
    return [c["label"] for c in answer["citations"] if c["cited"]]


def share_report(share: Share) -> str:
    ms = sorted(share.attribute_ms)
    median = ms[len(ms) // 2] if ms else float("nan")
    n = share.answers
    return (
        f"| answers | cite a passage by the model's labels (before) | cite a passage (after) | "
        f"grounded: false | attribution skipped | attribute stage, median ms |\n"
        f"| --- | --- | --- | --- | --- | --- |\n"
        f"| {n} | {share.by_model} ({share.by_model / n:.0%}) | {share.cited} "
        f"({share.cited / n:.0%}) | {share.grounded_false} | {share.skipped} | {median:.0f} |"
    )
