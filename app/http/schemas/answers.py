"""``POST /v1/ask``: the question's body, the answer, and the report every answer carries
besides its text (``Report``: citations, grounding, quarantined passages, timings, budget,
usage), which a chat completion carries too, as extension fields."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, StrictBool, StrictInt

from app.http.schemas.common import (
    AnswerRequest,
    BudgetReport,
    DegradationOut,
    NonEmptyText,
    PassageOut,
    StageOut,
)


class AskRequest(AnswerRequest):
    question: NonEmptyText
    collection: NonEmptyText | None = None
    top_k: StrictInt | None = Field(None, ge=1, description="Passages given to the prompt.")
    stream: StrictBool = False


class Citation(PassageOut):
    label: int = Field(description="The [n] this passage carried in the prompt.")
    cited: bool = Field(
        description="Whether the answer cites it: by its label, or, when the answer carries "
        "no label, because it supports one of the answer's sentences (attribution)."
    )
    by: Literal["model", "attributed"] | None = Field(
        None,
        description="How the citation was found: `model` (the answer carries its label) or "
        "`attributed` (an answer sentence is similar enough to one of its sentences); null "
        "when it is not cited.",
    )
    support: float | None = Field(
        None,
        description="For an attributed citation, the cosine similarity of the answer sentence "
        "it supports best to its most similar sentence.",
    )


#: How an answer's citations were found (``Report.attribution``).
AttributionMethod = Literal["model", "attributed", "unattributed", "skipped", "empty"]
GROUNDED_DESCRIPTION = (
    "Whether the passages support what the answer says beyond the question's own words: true "
    "when it adds something and most of what it adds (its content words and numbers) is in the "
    "passages the prompt held; false for an echo of the question, a refusal, an empty answer, "
    "or one the passages do not bear out (app/stages/grounding.py). Independent of how the "
    "citations were found; null only when the answer was not judged."
)
ATTRIBUTION_DESCRIPTION = (
    "How the citations were found: `model` (the answer's own [n] labels), `attributed` (no "
    "label: answer sentences attributed to passages by embedding similarity), `unattributed` "
    "(attribution ran and no passage supports any sentence: not grounded), `skipped` (no "
    "label, and no time left in the budget to attribute: citations not attributed; a "
    "degradation says why), `empty` (no answer text)."
)


class QuarantinedOut(PassageOut):
    """A retrieved passage kept out of the prompt (its text is not shown)."""

    reasons: list[str] = Field(
        description="The injection rules it tripped (app/safety/injection.py)."
    )


class UsageOut(BaseModel):
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


class Report(BaseModel):
    """What every answer carries besides its text (the streamed ``done`` event holds this)."""

    citations: list[Citation]
    grounded: bool | None = Field(description=GROUNDED_DESCRIPTION)
    attribution: AttributionMethod = Field(description=ATTRIBUTION_DESCRIPTION)
    trace_id: str
    timings_ms: dict[str, float]
    stages: list[StageOut] = Field(
        description="Each hop in the order it started: when, what it spent, what it was "
        "allocated (the request's waterfall)."
    )
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
