"""The OpenAI-compatible face: ``POST /v1/chat/completions`` (the conversation, the
``chat.completion`` object and ragtime's extension fields) and ``GET /v1/models``."""

# Written from OpenAI's API reference, https://platform.openai.com/docs/api-reference: the
# request of chat/create, the chat.completion object (chat/object), the chat.completion.chunk
# object (chat/streaming) and the model list (models/list); the error object from
# https://platform.openai.com/docs/guides/error-codes. The tests check what the routes send
# against the official ``openai`` package's own types (``openai.types.chat.ChatCompletion``,
# ``ChatCompletionChunk``, ``openai.types.Model``) and parse it with that package's client.

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr

from app.http.schemas.answers import (
    ATTRIBUTION_DESCRIPTION,
    GROUNDED_DESCRIPTION,
    AttributionMethod,
    Citation,
)
from app.http.schemas.common import (
    AnswerBudgetReport,
    AnswerRequest,
    DegradationOut,
    NonEmptyText,
    StageOut,
)


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


class ChatCompletionRequest(AnswerRequest):
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
    budget: AnswerBudgetReport
    timings_ms: dict[str, float]
    stages: list[StageOut]
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
