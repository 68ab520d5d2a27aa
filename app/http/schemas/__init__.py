"""Request and response bodies of the HTTP API, one module per route group: what several routes
share (``common``), ask and the report every answer carries (``answers``), search (``search``),
the OpenAI-compatible chat completions and models (``chat``), and collections and uploads
(``collections``). Import them from here: ``from app.http.schemas import AskRequest``."""

from app.http.schemas.answers import (
    ATTRIBUTION_DESCRIPTION,
    GROUNDED_DESCRIPTION,
    AskRequest,
    AskResponse,
    AttributionMethod,
    Citation,
    QuarantinedOut,
    Report,
    UsageOut,
)
from app.http.schemas.chat import (
    ChatChoice,
    ChatCompletionOut,
    ChatCompletionRequest,
    ChatMessage,
    ChatMessageOut,
    ChatUsage,
    ContentPart,
    ModelList,
    ModelOut,
    PromptTokensDetails,
    RagtimeExtensions,
    StreamOptions,
)
from app.http.schemas.collections import (
    CollectionList,
    CollectionOut,
    DocumentText,
    IngestCopy,
    IngestFailure,
    IngestResponse,
)
from app.http.schemas.common import (
    BudgetedRequest,
    BudgetReport,
    DegradationOut,
    NonEmptyText,
    PassageOut,
)
from app.http.schemas.search import SearchHit, SearchRequest, SearchResponse

__all__ = [
    "ATTRIBUTION_DESCRIPTION",
    "GROUNDED_DESCRIPTION",
    "AskRequest",
    "AskResponse",
    "AttributionMethod",
    "BudgetReport",
    "BudgetedRequest",
    "ChatChoice",
    "ChatCompletionOut",
    "ChatCompletionRequest",
    "ChatMessage",
    "ChatMessageOut",
    "ChatUsage",
    "Citation",
    "CollectionList",
    "CollectionOut",
    "ContentPart",
    "DegradationOut",
    "DocumentText",
    "IngestCopy",
    "IngestFailure",
    "IngestResponse",
    "ModelList",
    "ModelOut",
    "NonEmptyText",
    "PassageOut",
    "PromptTokensDetails",
    "QuarantinedOut",
    "RagtimeExtensions",
    "Report",
    "SearchHit",
    "SearchRequest",
    "SearchResponse",
    "StreamOptions",
    "UsageOut",
]
