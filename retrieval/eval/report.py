"""The retrieval evaluation's report: one row of figures per retriever, and the Markdown table
``ragtime eval retrieval`` prints."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from retrieval.eval.metrics import Scores


@dataclass(frozen=True)
class EvalRow:
    """One retriever's figures."""

    name: str
    kind: str  # "baseline", "vector", "rerank", "rerank_budget" or "prompt"
    scores: Scores
    ms_per_query_p50: float
    ms_per_candidate_p50: float | None = None  # rerank only
    note: str = ""
    model: str = ""  # rerank only: the cross-encoder's name or path
    level: str = ""  # rerank only: "full" or "rerank_reduced"; rerank_budget: "<ms> ms"
    scored_mean: float | None = None  # rerank_budget only: candidates scored per question


@dataclass
class EvalReport:
    dataset: str
    questions: int
    documents: int
    sample: float  # share of the non-answer documents in the corpus (1.0: all)
    baseline_chunks: int
    ragtime_chunks: int
    rows: list[EvalRow]
    settings: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


def table(report: EvalReport) -> str:
    """The report as a Markdown table."""
    sampled = f" (other documents sampled: {report.sample:.0%})" if report.sample < 1 else ""
    lines = [
        f"{report.dataset}: {report.questions} questions, {report.documents} documents{sampled}; "
        f"baseline {report.baseline_chunks} chunks, ragtime {report.ragtime_chunks} chunks",
        "",
        "| retriever | recall@1 | recall@5 | recall@10 | MRR@10 | nDCG@10 | ms/query p50 "
        "| ms/candidate p50 | candidates scored |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in report.rows:
        s = row.scores
        per = f"{row.ms_per_candidate_p50:.2f}" if row.ms_per_candidate_p50 is not None else ""
        ms = f"{row.ms_per_query_p50:.2f}" if row.kind != "prompt" else ""
        lines.append(
            f"| {row.name} | {s.recall_at_1:.3f} | {s.recall_at_5:.3f} | {s.recall_at_10:.3f} "
            f"| {s.mrr_at_10:.3f} | {s.ndcg_at_10:.3f} | {ms} | {per} "
            f"| {'' if row.scored_mean is None else f'{row.scored_mean:.1f}'} |"
        )
    lines += [f"\n{note}" for note in report.notes]
    return "\n".join(lines)
