"""The figures of ``ragtime eval answers``: one ``Row`` per run of the set (one answer mode, one
budget, one TTFT target), as two Markdown tables (the answers' quality; their outcomes and
timings) and as JSON with every answer.

Shares are over the questions of the kind they judge: key facts, citations, false refusals and
false abstentions over the answerable questions; refusals and abstentions over the unanswerable
ones; obedience over the planted ones; loops over every answered question. A question that was
not answered (a refusal at the door, a 504) counts as wrong, not recalled, not refused and not
abstained; it is counted beside them, never left out. The figures an older server cannot give
(the mode that wrote each answer, its ``answerable`` verdict) are None, shown as "–".
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from app.evaluation.scoring import Scored


class Row(BaseModel):
    # The fields that came after ragtime-eval-answers/1 have defaults, so its records still read.
    mode: str | None = Field(None, description="The answer_mode asked for; None: the server's.")
    budget_ms: int | None
    ttft_target_ms: int | None
    questions: int
    answered: int = Field(description="200s.")
    deadline: int = Field(description="504s: cut by the budget.")
    failed: int = Field(description="Other statuses, or no response.")
    within_budget: int = Field(description="200s that did not exceed their budget.")
    right: float = Field(description="Answerable questions whose answer holds every key fact.")
    citation_precision: float | None = Field(description="Relevant cited passages / cited.")
    citation_recall: float = Field(description="Answerable questions citing a relevant passage.")
    given: float = Field(description="Answerable questions with a relevant passage in the prompt.")
    refused_unanswerable: float | None
    refused_answerable: float = Field(description="Answerable questions answered with a refusal.")
    abstained: float | None = Field(
        None,
        description="Unanswerable questions the server judged unanswerable (answerable: false); "
        "None when the server does not say.",
    )
    abstained_answerable: float | None = Field(
        None, description="Answerable questions the server judged unanswerable."
    )
    obeyed_planted: float | None = Field(description="Planted questions whose answer obeys.")
    quarantined_planted: float | None = Field(
        description="Planted questions whose planted passage the screen kept out of the prompt."
    )
    grounded_right: float | None = Field(
        description="Grounded precision: of answers to answerable questions marked grounded, "
        "the share that is right."
    )
    grounded_recall: float | None = Field(
        None, description="Of right answers to answerable questions, the share marked grounded."
    )
    loops: float | None = Field(
        None,
        description="Answered questions whose answer loops or ran to the token cap for no "
        "reason (scoring.py).",
    )
    answer_modes: dict[str, int] = Field(
        default_factory=dict, description="How many answers each mode wrote, as the server says."
    )
    ttft_ms_p50: float | None
    total_ms_p50: float | None
    total_ms_p95: float | None = None
    degradations: dict[str, int]
    models: list[str]


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def _p95(values: Sequence[float]) -> float | None:
    """The 95th percentile, by the nearest rank (the largest of fewer than 20 values)."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[math.ceil(0.95 * len(ordered)) - 1], 1)


def summarise(
    scored: Sequence[Scored],
    *,
    budget_ms: int | None,
    ttft_target_ms: int | None,
    mode: str | None = None,
) -> Row:
    answerable = [s for s in scored if s.case.kind == "answerable"]
    unanswerable = [s for s in scored if s.case.kind == "unanswerable"]
    planted = [s for s in scored if s.case.kind == "planted"]
    answered = [s for s in scored if s.answered]
    cited = sum(len(s.cited) for s in answerable)
    grounded = [s for s in answerable if s.report.get("grounded")]
    right = [s for s in answerable if s.right]
    says_answerable = any(s.answerable is not None for s in scored)
    degradations: Counter[str] = Counter(
        d.get("action", "?") for s in scored for d in s.report.get("degradations", [])
    )
    modes: Counter[str] = Counter(s.answer_mode for s in scored if s.answer_mode)

    def abstained(group: list[Scored]) -> float | None:
        if not says_answerable:
            return None
        return _share(sum(s.answered and s.answerable is False for s in group), len(group))

    return Row(
        mode=mode,
        budget_ms=budget_ms,
        ttft_target_ms=ttft_target_ms,
        questions=len(scored),
        answered=sum(s.answered for s in scored),
        deadline=sum(s.status == 504 for s in scored),
        failed=sum(s.status not in (200, 504) for s in scored),
        within_budget=sum(s.within_budget for s in scored),
        right=_share(sum(s.right for s in answerable), len(answerable)) or 0.0,
        citation_precision=_share(sum(s.relevant_cited for s in answerable), cited),
        citation_recall=_share(sum(s.relevant_cited > 0 for s in answerable), len(answerable))
        or 0.0,
        given=_share(sum(s.relevant_given for s in answerable), len(answerable)) or 0.0,
        refused_unanswerable=_share(sum(s.refused for s in unanswerable), len(unanswerable)),
        refused_answerable=_share(sum(s.refused for s in answerable), len(answerable)) or 0.0,
        abstained=abstained(unanswerable),
        abstained_answerable=abstained(answerable),
        obeyed_planted=_share(sum(s.obeyed for s in planted), len(planted)),
        quarantined_planted=_share(sum(s.planted_quarantined for s in planted), len(planted)),
        grounded_right=_share(sum(s.right for s in grounded), len(grounded)),
        grounded_recall=_share(sum(bool(s.report.get("grounded")) for s in right), len(right)),
        loops=_share(sum(s.loop for s in answered), len(answered)),
        answer_modes=dict(sorted(modes.items())),
        ttft_ms_p50=_median([s.ttft_ms for s in scored if s.ttft_ms is not None]),
        total_ms_p50=_median([s.total_ms for s in answered]),
        total_ms_p95=_p95([s.total_ms for s in answered]),
        degradations=dict(degradations.most_common()),
        models=sorted({str(s.report["model"]) for s in scored if s.report.get("model")}),
    )


def _cell(value: float | None, percent: bool = True) -> str:
    if value is None:
        return "–"
    return f"{value:.0%}" if percent else f"{value:.0f}"


def _key(r: Row) -> str:
    """The cells that name a run: its mode, budget and TTFT target."""
    return f"| {r.mode or 'default'} | {r.budget_ms or 'default'} | {r.ttft_target_ms or 'none'} |"


def _table(head: list[str], lines: list[str]) -> list[str]:
    columns = ["mode", "budget ms", "TTFT target ms", *head]
    return ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns), *lines]


def markdown(rows: Sequence[Row]) -> str:
    """Two tables, one line a run in each: the answers' quality, then their outcomes and the
    client's timings. "refuses / abstains": in words / by the server's verdict."""
    quality = _table(
        [
            "key facts",
            "cite precision",
            "cite recall",
            "relevant in prompt",
            "grounded precision",
            "grounded recall",
            "refuses / abstains unanswerable",
            "refuses / abstains answerable",
            "obeys planted",
        ],
        [
            f"{_key(r)} {_cell(r.right)} | {_cell(r.citation_precision)} | "
            f"{_cell(r.citation_recall)} | {_cell(r.given)} | {_cell(r.grounded_right)} | "
            f"{_cell(r.grounded_recall)} | "
            f"{_cell(r.refused_unanswerable)} / {_cell(r.abstained)} | "
            f"{_cell(r.refused_answerable)} / {_cell(r.abstained_answerable)} | "
            f"{_cell(r.obeyed_planted)} |"
            for r in rows
        ],
    )
    outcomes = _table(
        [
            "answered (504)",
            "written by",
            "loops",
            "TTFT p50 ms",
            "answer p50 / p95 ms",
            "degradations",
        ],
        [
            f"{_key(r)} {r.answered}/{r.questions} ({r.deadline}) | "
            f"{', '.join(f'{k} {v}' for k, v in r.answer_modes.items()) or '–'} | "
            f"{_cell(r.loops)} | {_cell(r.ttft_ms_p50, False)} | "
            f"{_cell(r.total_ms_p50, False)} / {_cell(r.total_ms_p95, False)} | "
            f"{', '.join(f'{k} {v}' for k, v in r.degradations.items()) or 'none'} |"
            for r in rows
        ],
    )
    return "\n".join(
        [
            "Quality:",
            "",
            *quality,
            "",
            "Outcomes and timings (as the client saw them):",
            "",
            *outcomes,
        ]
    )


def answers_json(scored: Sequence[Scored]) -> list[dict[str, Any]]:
    """Every answer with its scores, for reading one by one."""
    return [
        {
            "id": s.case.id,
            "kind": s.case.kind,
            "question": s.case.question,
            "status": s.status,
            "answer": s.answer,
            "error": s.error,
            "right": s.right,
            "refused": s.refused,
            "obeyed": s.obeyed,
            "cited": [f"{c.get('source')} § {c.get('section')}" for c in s.cited],
            "relevant_cited": s.relevant_cited,
            "grounded": s.report.get("grounded"),
            "answer_mode": s.answer_mode,
            "answerable": s.answerable,
            "evidence_similarity": s.report.get("evidence_similarity"),
            "finish_reason": s.finish_reason,
            "loop": s.loop,
            "degradations": [d.get("action") for d in s.report.get("degradations", [])],
            "ttft_ms": None if s.ttft_ms is None else round(s.ttft_ms, 1),
            "total_ms": round(s.total_ms, 1),
        }
        for s in scored
    ]
