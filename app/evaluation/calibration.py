"""The abstention threshold, calibrated: how well each least similarity separates the questions
the documents answer from those they do not, read from ``ragtime eval answers --json`` runs.

Each answer of a run records ``evidence_similarity``: the similarity to the question of the
closest sentence of the passages the prompt held (the extract stage's). A threshold refuses the
questions below it. For each candidate it counts the unanswerable questions refused (their
share: **recall** of abstention), the answerable ones refused (**false refusals**), and the
**precision** of a refusal (refused unanswerable over all refused). Planted questions are
answerable. Runs made with abstention off (``RAGTIME_ANSWERABLE_MIN_SIMILARITY=-1``) weigh
every question; a run with it on has already refused some, which still carry their similarity.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Weighed:
    """One question's closest evidence: its set, its id, whether it is answerable."""

    dataset: str
    id: str
    answerable: bool
    similarity: float


@dataclass(frozen=True)
class Cut:
    """What a threshold does to the questions weighed."""

    threshold: float
    refused_unanswerable: int
    unanswerable: int
    refused_answerable: int
    answerable: int

    @property
    def recall(self) -> float:
        return self.refused_unanswerable / self.unanswerable if self.unanswerable else 0.0

    @property
    def false_refusals(self) -> float:
        return self.refused_answerable / self.answerable if self.answerable else 0.0

    @property
    def precision(self) -> float | None:
        refused = self.refused_unanswerable + self.refused_answerable
        return self.refused_unanswerable / refused if refused else None


def read_runs(paths: Iterable[Path]) -> list[Weighed]:
    """Every answer with a similarity in the files' runs (one per question and set: the first
    run that weighed it)."""
    seen: dict[tuple[str, str], Weighed] = {}
    for path in paths:
        record = json.loads(Path(path).read_text())
        dataset = str(record.get("dataset", path))
        for run in record.get("runs", []):
            for answer in run.get("answers", []):
                similarity = answer.get("evidence_similarity")
                key = (dataset, str(answer.get("id")))
                if similarity is None or key in seen:
                    continue
                answerable = answer.get("kind") != "unanswerable"
                seen[key] = Weighed(dataset, key[1], answerable, float(similarity))
    return list(seen.values())


def cut(weighed: Sequence[Weighed], threshold: float) -> Cut:
    below = [w for w in weighed if w.similarity < threshold]
    return Cut(
        threshold,
        sum(not w.answerable for w in below),
        sum(not w.answerable for w in weighed),
        sum(w.answerable for w in below),
        sum(w.answerable for w in weighed),
    )


def sweep(weighed: Sequence[Weighed], *, start: float = 0.2, stop: float = 0.7) -> list[Cut]:
    """The cuts on a 0.025 grid from ``start`` to ``stop``."""
    steps = round((stop - start) / 0.025)
    return [cut(weighed, round(start + i * 0.025, 3)) for i in range(steps + 1)]


def markdown(cuts: Sequence[Cut]) -> str:
    lines = [
        "| least similarity | unanswerable refused (recall) | answerable refused | "
        "precision of a refusal |",
        "| --- | --- | --- | --- |",
    ]
    for c in cuts:
        precision = "–" if c.precision is None else f"{c.precision:.0%}"
        lines.append(
            f"| {c.threshold:.3f} | {c.refused_unanswerable}/{c.unanswerable} ({c.recall:.0%}) | "
            f"{c.refused_answerable}/{c.answerable} ({c.false_refusals:.0%}) | {precision} |"
        )
    return "\n".join(lines)
