"""Request and response bodies of the HTTP API."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    StringConstraints,
)

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
    k: StrictInt | None = Field(
        None, ge=1, description="Passages to return; at most RAGTIME_MAX_SEARCH_K (100)."
    )
    source_prefix: StrictStr | None = Field(
        None, description="Only sources starting with this path (as hits show it)."
    )
    kind: StrictStr | list[StrictStr] | None = Field(
        None, description="Only chunks of this file type, or of one of these (`md`, `pdf`...)."
    )
    mode: Literal["dense", "keyword", "hybrid"] | None = Field(
        None,
        description="dense (vectors), keyword (BM25 over the words: exact identifiers, "
        "options, numbers), or hybrid (both, fused by reciprocal rank); default "
        "RAGTIME_SEARCH_MODE.",
    )


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
    found_by: list[str] = Field(
        default_factory=list,
        description="The searches that found it: `dense`, `keyword`, or both (hybrid); the "
        "score is then the cosine, the BM25 score, or the fused rank score.",
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
            "message": passage.message or None,
            "also": list(passage.also),
        }


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
AttributionMethod = Literal["model", "attributed", "skipped", "empty"]
GROUNDED_DESCRIPTION = (
    "Whether any passage supports the answer: true when it cites one (by label or by "
    "attribution), false when none supports it, null when that was not checked (attribution "
    "was skipped: see `attribution`)."
)
ATTRIBUTION_DESCRIPTION = (
    "How the citations were found: `model` (the answer's own [n] labels), `attributed` (no "
    "label: answer sentences attributed to passages by embedding similarity), `skipped` (no "
    "label, and no time left in the budget to attribute: citations not attributed; a "
    "degradation says why), `empty` (no answer text)."
)


class QuarantinedOut(PassageOut):
    """A retrieved passage kept out of the prompt (its text is not shown)."""

    reasons: list[str] = Field(
        description="The injection rules it tripped (app/safety/injection.py)."
    )


class SearchHit(PassageOut):
    text: str
    kind: str = Field("", description="The file type the chunk came from.")
    page: int | None = Field(None, description="1-based page of a paged format, else null.")
    ocr: bool = Field(False, description="Whether its text was read by OCR (a scan, an image).")

    @classmethod
    def from_passage(cls, passage: Passage) -> SearchHit:
        return cls(
            text=passage.text,
            kind=passage.kind,
            page=passage.page,
            ocr=passage.ocr,
            **cls.fields_of(passage),
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


# -- The OpenAI-compatible face: POST /v1/chat/completions, GET /v1/models -------------------
# Written from OpenAI's API reference, https://platform.openai.com/docs/api-reference: the
# request of chat/create, the chat.completion object (chat/object), the chat.completion.chunk
# object (chat/streaming) and the model list (models/list); the error object from
# https://platform.openai.com/docs/guides/error-codes. The tests check what the routes send
# against the official ``openai`` package's own types (``openai.types.chat.ChatCompletion``,
# ``ChatCompletionChunk``, ``openai.types.Model``) and parse it with that package's client.


class ContentPart(BaseModel):
    """A part of a message's content: ``{"type": "text", "text": ...}``; other kinds (images,
    audio, files) are accepted and carry no question text."""

    model_config = ConfigDict(extra="allow")

    type: StrictStr
    text: StrictStr | None = None


class ChatMessage(BaseModel):
    """One message of the conversation (``name``, ``tool_calls`` and the like are ignored)."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: StrictStr | list[ContentPart] | None = None

    def text(self) -> str:
        """The message's text: its string content, or its text parts joined by newlines."""
        if isinstance(self.content, str):
            return self.content
        parts = self.content or []
        return "\n".join(p.text for p in parts if p.type == "text" and p.text)


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: StrictBool = False


class ChatCompletionRequest(BudgetedRequest):
    """``POST /v1/chat/completions``: the conversation's last user message is the question.

    OpenAI's parameters that ragtime has no use for (``stop``, ``seed``, ``user``, ``tools``, the
    penalties, ...) are accepted and ignored, so that any OpenAI client's request goes through;
    ``temperature`` is checked and ignored (answers use ``RAGTIME_TEMPERATURE``). Extension
    fields: ``collection``, ``top_k`` and ``budget_ms``, as ``POST /v1/ask`` takes them."""

    model_config = ConfigDict(extra="ignore")

    model: NonEmptyText = Field(description="A model that GET /v1/models lists.")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: StrictBool | None = False
    stream_options: StreamOptions | None = None
    max_tokens: StrictInt | None = Field(None, ge=1, description="Deprecated by OpenAI.")
    max_completion_tokens: StrictInt | None = Field(
        None, ge=1, description="A cap on answer tokens, within what the budget allows."
    )
    temperature: StrictFloat | None = Field(None, ge=0, le=2, description="Ignored.")
    n: StrictInt | None = Field(None, ge=1, le=1, description="One choice only.")
    collection: NonEmptyText | None = Field(None, description="Extension: the collection.")
    top_k: StrictInt | None = Field(
        None, ge=1, description="Extension: passages given to the prompt."
    )


class PromptTokensDetails(BaseModel):
    cached_tokens: int


class ChatUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class ChatMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


class ChatChoice(BaseModel):
    index: int = 0
    message: ChatMessageOut
    finish_reason: Literal["stop", "length"]
    logprobs: None = None


class RagtimeExtensions(BaseModel):
    """What an answer of ``POST /v1/ask`` reports besides its text, as extension fields of a
    chat completion (and of the stream's last chunk with a choice)."""

    citations: list[Citation]
    grounded: bool | None = Field(description=GROUNDED_DESCRIPTION)
    attribution: AttributionMethod = Field(description=ATTRIBUTION_DESCRIPTION)
    degradations: list[DegradationOut]
    budget: BudgetReport
    timings_ms: dict[str, float]
    trace_id: str
    ragtime_finish_reason: str = Field(
        description="How the answer ended, as /v1/ask says it (deadline, skipped, ...)."
    )


class _ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage | None


class ChatCompletionOut(RagtimeExtensions, _ChatCompletion):
    """A ``chat.completion`` object: OpenAI's fields, then the extension fields."""


class ModelOut(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]


# -- collections: what a key may read, and documents uploaded over HTTP ----------------------


class CollectionOut(BaseModel):
    name: str
    chunks: int


class CollectionList(BaseModel):
    """The collections the request's key may read (others are never named)."""

    collections: list[CollectionOut]


class DocumentText(BaseModel):
    """One document sent as JSON text; ``source`` names it (its suffix gives its format) and a
    later upload of the same source replaces it."""

    model_config = ConfigDict(extra="forbid")

    source: NonEmptyText = Field(description="File name, e.g. notes.md; its suffix is its type.")
    text: StrictStr


class IngestFailure(BaseModel):
    source: str
    reason: str


class IngestCopy(BaseModel):
    source: str
    of: str = Field(description="The source it is a byte-identical copy of.")


class IngestResponse(BaseModel):
    collection: str
    files: int = Field(description="Documents ingested (copies among them).")
    chunks: int = Field(description="Chunks they made.")
    sources: list[str] = Field(
        description="The sources ingested, as searches will name them: an e-mail's "
        "attachments follow it, each named `<e-mail>#<file name>`."
    )
    failures: list[IngestFailure] = Field(
        description="Documents (or attachments) that could not be ingested."
    )
    copies: list[IngestCopy] = Field(
        default_factory=list,
        description="Documents recorded as byte-identical copies of a source the collection "
        "holds (or of another document of the upload): no failure; searchable under both names.",
    )
