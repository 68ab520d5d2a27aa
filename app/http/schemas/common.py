"""What the bodies of several routes share: the text a field may not leave empty, the body
every question route builds on (``BudgetedRequest``: strict JSON types, no other fields, an
optional ``budget_ms``; ``AnswerRequest`` adds the answer's own ``ttft_target_ms``), what a
request's budget reports back (``BudgetReport``; an answer's, with its first token,
``AnswerBudgetReport``; ``StageOut``, ``DegradationOut``), and a retrieved passage as answers and
searches show it (``PassageOut``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StringConstraints

from retrieval import Passage

NonEmptyText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class BudgetedRequest(BaseModel):
    """A question route's body: its fields are JSON's own types, never converted (``"1000"``,
    ``1000.0``, ``1e3`` and ``true`` are not integers), and no others are allowed."""

    model_config = ConfigDict(extra="forbid")

    budget_ms: StrictInt | None = Field(
        None, description="Latency budget for this request, in ms (an integer)."
    )


class AnswerRequest(BudgetedRequest):
    """A route's body that asks for an answer: its budget, its own TTFT target, and who writes
    it."""

    answer_mode: Literal["generate", "extract", "auto"] | None = Field(
        None,
        description="Who writes the answer: `generate` (the model), `extract` (the stretch "
        "of one passage that best answers, with its [n], no model call: milliseconds), `auto` "
        "(the model, and the passages' own answer instead when generation does not fit the "
        "budget or its answer is not borne out by them; a degradation says so). Default: the "
        "service's (RAGTIME_ANSWER_MODE, else chosen per backend). Whatever the mode, a "
        'question no passage is close enough to is answered "The documents do not answer this."',
    )

    ttft_target_ms: StrictInt | None = Field(
        None,
        ge=1,
        description="This request's time-to-first-token target, in ms from arrival: plans "
        "predicted to meet it are preferred (a shorter context, say so in the degradations) "
        "while they keep most of the answer's quality. Default: the service's "
        "(RAGTIME_TTFT_TARGET_MS; none unless set).",
    )


class BudgetReport(BaseModel):
    budget_ms: float
    spent_ms: float
    remaining_ms: float
    exceeded: bool = Field(
        description="Whether the request ran past its budget (a stage past its allocation "
        "alone is not: see `stages`)."
    )


class AnswerBudgetReport(BudgetReport):
    """An answer's budget report: the request's totals, and when its first token came."""

    ttft_ms: float | None = Field(
        description="When the answer's first token came, in ms from the request's arrival: the "
        "model's first token, or, for an answer taken from the passages (`extract`, `abstain`), "
        "when its text was ready. Null only for an answer with no text."
    )


class StageOut(BaseModel):
    """One hop of the request, as its budget charged it: the waterfall's bar."""

    stage: str
    start_ms: float = Field(
        description="When the stage first started, in ms from the request's arrival."
    )
    spent_ms: float = Field(description="Its wall time, over all its runs.")
    allocated_ms: float = Field(
        description="What the plan gave it when it started: the budget left, less what the "
        "stages after it were reserved (time an earlier stage did not use is in it), from its "
        "start."
    )
    exceeded: bool = Field(
        description="Whether it ran past its allocation (a run of it ended after the budget "
        "less what was reserved after it)."
    )


class DegradationOut(BaseModel):
    stage: str
    action: str
    reason: str


class PassageOut(BaseModel):
    id: int
    source: str
    title: str
    section: str
    score: float
    rerank_score: float | None = None
    found_by: list[str] = Field(
        default_factory=list,
        description="The searches that found it: `dense`, `keyword`, or both (hybrid).",
    )
    score_kind: str = Field(
        "",
        description="What `score` is: `cosine` (dense search: cosine similarity, at most 1), "
        "`bm25` (keyword search: BM25, unbounded) or `rrf` (hybrid search: reciprocal rank "
        "fusion, weight / (60 + rank) summed over the two rankings: about 0.016 for a first "
        "place in one; only the order means anything). Scores of different kinds do not "
        "compare.",
    )
    message: str | None = Field(
        None,
        description="For an e-mail's attachment (source `thread.eml#report.pdf`): the e-mail "
        "it came with (`thread.eml`); else null.",
    )
    also: list[str] = Field(
        default_factory=list,
        description="The other names of the same file: byte-identical copies of it (or, when "
        "`source` is a copy, the file it copies and its other copies).",
    )

    @classmethod
    def fields_of(cls, passage: Passage) -> dict[str, Any]:
        return {
            "id": passage.id,
            "source": passage.source,
            "title": passage.title,
            "section": passage.section,
            "score": round(passage.score, 6),
            "rerank_score": passage.rerank_score,
            "found_by": list(passage.found_by),
            "score_kind": passage.score_kind,
            "message": passage.message or None,
            "also": list(passage.also),
        }
