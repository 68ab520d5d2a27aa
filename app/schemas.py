"""Request and response bodies of the HTTP API."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StringConstraints

from retrieval import Passage

NonEmptyText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class BudgetedRequest(BaseModel):
    """A question route's body: its fields are JSON's own types, never converted (``"1000"``,
    ``1000.0``, ``1e3`` and ``true`` are not integers), and no others are allowed."""

    model_config = ConfigDict(extra="forbid")

    budget_ms: StrictInt | None = Field(
        None, description="Latency budget for this request, in ms (an integer)."
    )


class AskRequest(BudgetedRequest):
    question: NonEmptyText
    collection: NonEmptyText | None = None
    top_k: StrictInt | None = Field(None, ge=1, description="Passages given to the prompt.")
    stream: StrictBool = False


class SearchRequest(BudgetedRequest):
    query: NonEmptyText
    collection: NonEmptyText | None = None
    k: StrictInt | None = Field(None, ge=1)


class BudgetReport(BaseModel):
    budget_ms: float
    spent_ms: float
    remaining_ms: float
    exceeded: bool


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

    @classmethod
    def fields_of(cls, passage: Passage) -> dict[str, Any]:
        return {
            "id": passage.id,
            "source": passage.source,
            "title": passage.title,
            "section": passage.section,
            "score": round(passage.score, 6),
            "rerank_score": passage.rerank_score,
        }


class Citation(PassageOut):
    label: int = Field(description="The [n] this passage carried in the prompt.")
    cited: bool = Field(description="Whether the answer refers to it by its label.")


class QuarantinedOut(PassageOut):
    """A retrieved passage kept out of the prompt (its text is not shown)."""

    reasons: list[str] = Field(description="The injection rules it tripped (app/injection.py).")


class SearchHit(PassageOut):
    text: str

    @classmethod
    def from_passage(cls, passage: Passage) -> SearchHit:
        return cls(text=passage.text, **cls.fields_of(passage))


class UsageOut(BaseModel):
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


class Report(BaseModel):
    """What every answer carries besides its text (the streamed ``done`` event holds this)."""

    citations: list[Citation]
    trace_id: str
    timings_ms: dict[str, float]
    budget: BudgetReport
    degradations: list[DegradationOut]
    usage: UsageOut | None
    finish_reason: str
    model: str
    quarantined: list[QuarantinedOut] = Field(
        default_factory=list,
        description="Retrieved passages kept out of the prompt: they carried instructions "
        "aimed at the model (prompt injection).",
    )


class AskResponse(Report):
    answer: str


class SearchResponse(BaseModel):
    passages: list[SearchHit]
    trace_id: str
    timings_ms: dict[str, float]
    budget: BudgetReport
    degradations: list[DegradationOut]
