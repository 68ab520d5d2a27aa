"""The errors the OpenAPI document gives each operation: their bodies as the service sends them
(``app.http.errors``' ``{"error": {"type", "message", ...}}``, or OpenAI's shape on the
OpenAI-compatible routes), why each status is answered, the headers that come with a 401 and a
503, and which statuses each path answers."""

from __future__ import annotations

import copy
from typing import Any

NATIVE_ERROR = "Error"
OPENAI_ERROR = "OpenAIError"

ERROR_SCHEMAS: dict[str, Any] = {
    NATIVE_ERROR: {
        "title": "Error",
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["type", "message"],
                "properties": {
                    "type": {"type": "string", "description": "What kind of error."},
                    "message": {"type": "string", "description": "What was wrong."},
                    "field": {
                        "type": "string",
                        "description": "The field or header at fault (`body` for the whole body).",
                    },
                    "errors": {
                        "type": "array",
                        "description": "Each invalid field, on a 422.",
                        "items": {
                            "type": "object",
                            "required": ["field", "message"],
                            "properties": {
                                "field": {"type": "string"},
                                "message": {"type": "string"},
                            },
                        },
                    },
                    "score": {
                        "type": "number",
                        "description": "The moderation score, when moderation rejected it.",
                    },
                },
            }
        },
    },
    OPENAI_ERROR: {
        "title": "OpenAIError",
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type", "param", "code"],
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string", "enum": ["invalid_request_error", "server_error"]},
                    "param": {"type": ["string", "null"], "description": "The field at fault."},
                    "code": {"type": ["string", "null"], "description": "The error's type."},
                },
            }
        },
    },
}

AUTH_HEADER = {
    "WWW-Authenticate": {
        "description": "`Bearer`: the scheme a key is sent with.",
        "required": True,
        "schema": {"type": "string"},
    }
}
RETRY_HEADER = {
    "Retry-After": {
        "description": "Seconds to wait before asking again.",
        "required": True,
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    }
}

#: Each status an operation may answer with an error, and when.
WHY: dict[int, str] = {
    400: "A header that cannot be read (`Request-Timeout-Ms` not a whole number in ASCII "
    "digits), a question that moderation rejects, or a request the generation server refuses.",
    401: "A missing, malformed, wrong or revoked API key (checked before the body is read).",
    403: "The key lacks the scope the route needs (`ask`, `ingest`, `admin`).",
    404: "An unknown collection, or one the key may not read (the same answer).",
    409: "The collection was embedded by another embedding backend than the configured one.",
    413: "A body over `RAGTIME_MAX_BODY_BYTES`.",
    415: "A body not sent as `Content-Type: application/json`.",
    422: "A body that is empty, not JSON, nested too deeply, or whose fields have the wrong "
    "types or break a limit (each field named).",
    429: "The key is over its rate limit.",
    502: "The generation backend failed after the answer had begun.",
    503: "Refused at once: the process or a generation pool is at capacity (`overloaded`), the "
    "server is shutting down (`shutting_down`), the key store cannot be reached "
    "(`key_store_unavailable`), a collection's index cannot be loaded (`index_unavailable`), or "
    "the generation backend is down.",
    507: "The upload could not be written down to ingest it (a full disk); nothing was ingested.",
    504: "The budget cannot be met, or ran out before an answer began.",
}
#: What every route that takes a key may answer: no key (401), over its rate limit (429), the
#: key store down (503); 403 where the route needs a scope.
KEYED = (401, 429, 503)
SCOPED = (*KEYED, 403)
QUESTION_ERRORS = (*SCOPED, 400, 404, 409, 413, 415, 422, 502, 504)
ERRORS_BY_PATH: dict[str, tuple[int, ...]] = {
    "/v1/ask": QUESTION_ERRORS,
    "/v1/search": (*SCOPED, 400, 404, 409, 413, 415, 422, 504),
    # OpenAI answers an invalid request with 400: no 422 here; 404 also for an unknown model.
    "/v1/chat/completions": tuple(s for s in QUESTION_ERRORS if s != 422),
    "/v1/models": SCOPED,
    "/v1/alerts": SCOPED,
    "/v1/budget/model": SCOPED,
    "/v1/collections": KEYED,
    "/v1/collections/{name}/documents": (*SCOPED, 404, 413, 415, 422, 507),
}
OPENAI_PATHS = frozenset({"/v1/chat/completions", "/v1/models"})


def error_responses(path: str) -> dict[str, Any]:
    """The error responses of the operations at ``path``, by status, in its body's shape."""
    schema = OPENAI_ERROR if path in OPENAI_PATHS else NATIVE_ERROR
    return {str(status): _error_response(status, schema) for status in ERRORS_BY_PATH.get(path, ())}


def _error_response(status: int, schema: str) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": WHY[status],
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
    }
    if status == 401:
        response["headers"] = copy.deepcopy(AUTH_HEADER)
    elif status in (429, 503):
        response["headers"] = copy.deepcopy(RETRY_HEADER)
    return response
