"""``POST /v1/ask``: the question's body, the answer, and the report every answer carries
besides its text (``Report``: citations, grounding, quarantined passages, timings, budget,
usage), which a chat completion carries too, as extension fields."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, StrictBool, StrictInt

from app.http.schemas.common import (
    AnswerBudgetReport,
    AnswerRequest,
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
    text: str = Field(
        description="The passage's text, personal data and secrets redacted (as a search's "
        "hits): what a reader checks the citation against."
    )
    cited: bool = Field(
        description="Whether the answer cites it: by its label, or, when the answer carries "
        "no label, because it supports one of the answer's sentences (attribution)."
    )
    by: Literal["model", "attributed", "extracted"] | None = Field(
        None,
        description="How the citation was found: `model` (the model wrote its label), "
        "`attributed` (an answer sentence shares enough of its words with one of its "
        "sentences, or is similar enough to one) or "
        "`extracted` (the answer quotes its sentences, with its label); null when it is not "
        "cited.",
    )
    support: float | None = Field(
        None,
        description="For an attributed citation, how well it supports the answer sentence it "
        "supports best: the share of that sentence's content words one of its sentences holds "
        "when words decided it, else the cosine similarity to its most similar sentence.",
    )


#: How an answer's citations were found (``Report.attribution``).
AttributionMethod = Literal[
    "model", "attributed", "extracted", "unattributed", "skipped", "empty", "abstained"
]
GROUNDED_DESCRIPTION = (
    "Whether the passages bear out what the answer says beyond the question's own words: true "
    "when it adds something and most of what it adds (its content words and numbers) is in the "
    "passages the prompt held; false for an echo of the question, a refusal, an abstention, an "
    "empty answer, an answer attribution found no support for (`unattributed`), or one the "
    "passages do not bear out: an unsupported answer (app/stages/grounding.py). Null only when "
    "the answer was not judged."
)
ATTRIBUTION_DESCRIPTION = (
    "How the citations were found: `model` (the model's own [n] labels), `attributed` (no "
    "label: answer sentences attributed to passages by the words they share, or else by "
    "embedding similarity), `extracted` (an extractive answer: the labels of the passages it "
    "quotes), `unattributed` (attribution ran "
    "and no passage supports any sentence: not grounded), `skipped` (no label, and no time "
    "left in the budget to attribute: citations not attributed; a degradation says why), "
    "`empty` (no answer text), `abstained` (the documents do not answer: nothing cited)."
)
ANSWER_MODE_DESCRIPTION = (
    "Who wrote the answer: `generate` (the model), `extract` (the passages' own sentences, "
    'each with its [n]), `abstain` (no passage is close enough to the question: "The '
    'documents do not answer this.", the closest passages listed, nothing generated).'
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
    answer_mode: Literal["generate", "extract", "abstain"] = Field(
        description=ANSWER_MODE_DESCRIPTION
    )
    answerable: bool = Field(
        description="Whether a passage is close enough to the question to answer it "
        "(`evidence_similarity` reaches RAGTIME_ANSWERABLE_MIN_SIMILARITY); false: the answer "
        "abstains."
    )
    evidence_similarity: float | None = Field(
        None,
        description="The cosine similarity to the question of the closest sentence of the "
        "passages the prompt held; null when none could be weighed.",
    )
    grounded: bool | None = Field(description=GROUNDED_DESCRIPTION)
    attribution: AttributionMethod = Field(description=ATTRIBUTION_DESCRIPTION)
    trace_id: str
    timings_ms: dict[str, float]
    stages: list[StageOut] = Field(
        description="Each hop in the order it started: when, what it spent, what the plan "
        "allocated it and whether it ran past that (the request's waterfall)."
    )
    budget: AnswerBudgetReport
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
