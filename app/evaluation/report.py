"""The figures of ``ragtime eval answers``: one ``Row`` per run of the set (one budget, one TTFT
target), as a Markdown table and as JSON with every answer.

Shares are over the questions of the kind they judge: key facts, citations and false refusals
over the answerable questions; refusals over the unanswerable ones; obedience over the planted
ones. A question that was not answered (a refusal at the door, a 504) counts as wrong, not
recalled and not refused; it is counted beside them, never left out.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from app.evaluation.scoring import Scored


class Row(BaseModel):
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
    obeyed_planted: float | None = Field(description="Planted questions whose answer obeys.")
    quarantined_planted: float | None = Field(
        description="Planted questions whose planted passage the screen kept out of the prompt."
    )
    grounded_right: float | None = Field(
        description="Of answers to answerable questions marked grounded, the share that is right."
    )
    ttft_ms_p50: float | None
    total_ms_p50: float | None
    degradations: dict[str, int]
    models: list[str]


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def _median(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


def summarise(
    scored: Sequence[Scored], *, budget_ms: int | None, ttft_target_ms: int | None
) -> Row:
    answerable = [s for s in scored if s.case.kind == "answerable"]
    unanswerable = [s for s in scored if s.case.kind == "unanswerable"]
    planted = [s for s in scored if s.case.kind == "planted"]
    cited = sum(len(s.cited) for s in answerable)
    grounded = [s for s in answerable if s.report.get("grounded")]
    degradations: Counter[str] = Counter(
        d.get("action", "?") for s in scored for d in s.report.get("degradations", [])
    )
    return Row(
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
        obeyed_planted=_share(sum(s.obeyed for s in planted), len(planted)),
        quarantined_planted=_share(sum(s.planted_quarantined for s in planted), len(planted)),
        grounded_right=_share(sum(s.right for s in grounded), len(grounded)),
        ttft_ms_p50=_median([s.ttft_ms for s in scored if s.ttft_ms is not None]),
        total_ms_p50=_median([s.total_ms for s in scored if s.answered]),
        degradations=dict(degradations.most_common()),
        models=sorted({str(s.report["model"]) for s in scored if s.report.get("model")}),
    )


def _cell(value: float | None, percent: bool = True) -> str:
    if value is None:
        return "–"
    return f"{value:.0%}" if percent else f"{value:.0f}"


def markdown(rows: Sequence[Row]) -> str:
    """One line a run: outcomes, the scores, and the client's timings."""
    head = (
        "| budget ms | TTFT target ms | answered (504) | key facts | cite precision | "
        "cite recall | relevant in prompt | refuses unanswerable | refuses answerable | "
        "obeys planted | TTFT p50 ms | answer p50 ms | degradations |"
    )
    lines = [head, "|" + " --- |" * (head.count("|") - 1)]
    for r in rows:
        saved = ", ".join(f"{k} {v}" for k, v in r.degradations.items()) or "none"
        lines.append(
            f"| {r.budget_ms or 'default'} | {r.ttft_target_ms or 'none'} | "
            f"{r.answered}/{r.questions} ({r.deadline}) | {_cell(r.right)} | "
            f"{_cell(r.citation_precision)} | {_cell(r.citation_recall)} | {_cell(r.given)} | "
            f"{_cell(r.refused_unanswerable)} | {_cell(r.refused_answerable)} | "
            f"{_cell(r.obeyed_planted)} | {_cell(r.ttft_ms_p50, False)} | "
            f"{_cell(r.total_ms_p50, False)} | {saved} |"
        )
    return "\n".join(lines)


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
            "degradations": [d.get("action") for d in s.report.get("degradations", [])],
            "ttft_ms": None if s.ttft_ms is None else round(s.ttft_ms, 1),
            "total_ms": round(s.total_ms, 1),
        }
        for s in scored
    ]
