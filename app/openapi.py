"""The OpenAPI document as the service really behaves: what FastAPI derives from the routes, then
what it cannot see, added here.

- The security scheme (``Authorization: Bearer <key>``) and which operations need it
  (``/readyz`` takes a key optionally; ``/healthz`` and ``/metrics`` none).
- Every error each operation answers, with its real body: ``{"error": {"type", "message", ...}}``
  (``app.errors``), or OpenAI's ``{"error": {"message", "type", "param", "code"}}`` on the
  OpenAI-compatible routes; ``WWW-Authenticate`` on a 401, ``Retry-After`` on a 503. FastAPI's
  ``HTTPValidationError`` (``detail``), which the service never sends, is gone.
- The streams: ``text/event-stream`` beside JSON, with the events each sends.
- ``/metrics`` as Prometheus's text format (or OpenMetrics), not JSON.
- The bounds that come from settings: ``budget_ms``, ``top_k``/``k``, the question's length,
  and the ``Request-Timeout-Ms`` header's form.

Request bodies are read by the routes themselves, after auth (``app.body``); the nested models
they refer to are hoisted into ``components.schemas`` here. ``schemathesis`` checks the result
against the running service (``tests/app/test_schemathesis.py``).
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.schemas import Report
from app.settings import Settings

SCHEME = "ApiKey"
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
    "Readiness": {
        "title": "Readiness",
        "type": "object",
        "required": ["ready"],
        "properties": {
            "ready": {"type": "boolean"},
            "components": {
                "type": "object",
                "description": "What each part holds or lacks: only with a valid API key.",
            },
        },
    },
    "CitationsEvent": {
        "title": "CitationsEvent",
        "type": "object",
        "required": ["citations"],
        "properties": {
            "citations": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/Citation"},
                "description": "The passages the answer is written from, in label order, "
                "before its first token: none cited yet (`done` says which are).",
            }
        },
    },
    "TokenEvent": {
        "title": "TokenEvent",
        "type": "object",
        "required": ["text"],
        "properties": {"text": {"type": "string", "description": "The next piece of answer."}},
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
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/redoc"})

CHUNK_SCHEMA: dict[str, Any] = {
    "title": "ChatCompletionChunk",
    "type": "object",
    "description": "OpenAI's `chat.completion.chunk`; the last with a choice also carries the "
    "extension fields of `ChatCompletionOut` (citations, budget, ...), `server_timing` and "
    "`traceparent`.",
    "required": ["id", "object", "created", "model", "choices"],
    "properties": {
        "id": {"type": "string"},
        "object": {"const": "chat.completion.chunk"},
        "created": {"type": "integer"},
        "model": {"type": "string"},
        "choices": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["index", "delta", "finish_reason"],
                "properties": {
                    "index": {"type": "integer"},
                    "delta": {
                        "type": "object",
                        "properties": {
                            "role": {"const": "assistant"},
                            "content": {"type": "string"},
                        },
                    },
                    "logprobs": {"type": "null"},
                    "finish_reason": {"enum": ["stop", "length", None]},
                },
            },
        },
        "usage": {"anyOf": [{"$ref": "#/components/schemas/ChatUsage"}, {"type": "null"}]},
    },
}


def _event(name: str | None, data: dict[str, Any]) -> dict[str, Any]:
    """One Server-Sent Event as OpenAPI 3.1 describes a stream's items: its fields, with the
    JSON its ``data`` holds as ``contentSchema``."""
    payload = {"type": "string", "contentMediaType": "application/json", "contentSchema": data}
    if name is None:
        return {"type": "object", "required": ["data"], "properties": {"data": payload}}
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {"event": {"const": name}, "data": payload},
    }


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


ASK_EVENT_SCHEMA: dict[str, Any] = {
    "oneOf": [
        _event("citations", _ref("CitationsEvent")),
        _event("token", _ref("TokenEvent")),
        _event("done", _ref("DoneEvent")),
        _event("error", _ref(NATIVE_ERROR)),
    ]
}
CHAT_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["data"],
    "if": {"properties": {"data": {"const": "[DONE]"}}},
    "else": _event(None, {"anyOf": [_ref("ChatCompletionChunk"), _ref(OPENAI_ERROR)]}),
}

ASK_EVENTS = (
    'Server-Sent Events, with `"stream": true`: one `event: citations` as soon as the passages '
    "are ready (a `CitationsEvent`: the evidence, before the first token), then `event: token` "
    'events whose data is a `TokenEvent` (`{"text": ...}`), then one `event: done` whose data '
    "is the report (the JSON answer less its text, as `Report`, plus `server_timing` and "
    "`traceparent`); or, when generation fails or the server shuts down after the passages "
    "were sent, one `event: error` whose data is an `Error`."
)
CHAT_EVENTS = (
    'Server-Sent Events, with `"stream": true`, as OpenAI streams them: `data:` lines each '
    "holding a `chat.completion.chunk` (the last with a choice carries `finish_reason` and the "
    "extension fields; with `stream_options.include_usage`, one more with the usage and no "
    "choice), then `data: [DONE]`; a failure after the first chunk ends the stream with "
    '`data: {"error": {...}}` (an `OpenAIError`).'
)


def install(app: FastAPI, settings: Settings) -> None:
    """Serve ``document(app, settings)`` as the app's OpenAPI document (built once)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document(app, settings)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def document(app: FastAPI, settings: Settings) -> dict[str, Any]:
    """FastAPI's document for ``app``, made true (see the module docstring)."""
    doc = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=app.description,
        routes=app.routes,
    )
    schemas: dict[str, Any] = doc.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas.update(copy.deepcopy(ERROR_SCHEMAS))
    schemas["ChatCompletionChunk"] = copy.deepcopy(CHUNK_SCHEMA)
    schemas["Report"] = _hoisted(
        Report.model_json_schema(ref_template="#/components/schemas/{model}"), schemas
    )
    schemas["DoneEvent"] = {
        "title": "DoneEvent",
        "allOf": [
            _ref("Report"),
            {
                "type": "object",
                "required": ["server_timing", "traceparent"],
                "properties": {
                    "server_timing": {"type": "string"},
                    "traceparent": {"type": "string"},
                },
            },
        ],
    }
    doc["components"]["securitySchemes"] = {
        SCHEME: {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key made by `ragtime keys create`, sent as "
            "`Authorization: Bearer <key>`.",
        }
    }
    for path, operations in doc["paths"].items():
        for operation in operations.values():
            _describe(path, operation, schemas, settings)
    return doc


def _describe(
    path: str, operation: dict[str, Any], schemas: dict[str, Any], settings: Settings
) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    responses.pop("422", None)  # FastAPI's `detail` shape: never sent
    if path in OPEN_PATHS:
        operation["security"] = []
    else:
        operation["security"] = [{SCHEME: []}]
    error = OPENAI_ERROR if path in OPENAI_PATHS else NATIVE_ERROR
    for status in ERRORS_BY_PATH.get(path, ()):
        responses[str(status)] = _error_response(status, error)
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None:
        body["schema"] = _bounded(_hoisted(body["schema"], schemas), settings)
    for parameter in operation.get("parameters", []):
        if parameter.get("in") == "header" and parameter["name"] == "Request-Timeout-Ms":
            parameter["schema"] = {
                "type": "string",
                "pattern": "^[ \\t]*[0-9]{1,12}[ \\t]*$",
                "description": "The request's budget in ms, when the body gives none: a whole "
                "number, clamped to the allowed range.",
            }
    if path == "/v1/ask":
        _add_stream(responses, ASK_EVENTS, ASK_EVENT_SCHEMA)
    elif path == "/v1/chat/completions":
        _add_stream(responses, CHAT_EVENTS, CHAT_EVENT_SCHEMA)
    elif path == "/readyz":
        operation["security"] = [{}, {SCHEME: []}]
        ready = {"application/json": {"schema": {"$ref": "#/components/schemas/Readiness"}}}
        responses["200"] = {"description": "Ready.", "content": ready}
        responses["503"] = {
            "description": "Not ready: a model or an index is not loaded, or a collection's "
            "index cannot be read. Why, only to an `admin` key.",
            "content": copy.deepcopy(ready),
        }
    elif path == "/metrics":
        text = {"schema": {"type": "string"}}
        responses["200"] = {
            "description": "Prometheus's text exposition format; OpenMetrics (with exemplars) "
            "when the `Accept` header asks for `application/openmetrics-text`.",
            "content": {"text/plain": text, "application/openmetrics-text": copy.deepcopy(text)},
        }


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


def _add_stream(responses: dict[str, Any], events: str, event: dict[str, Any]) -> None:
    """``text/event-stream`` beside JSON; ``event`` is the schema of each event (OpenAPI 3.1:
    the stream's ``schema`` describes one event)."""
    ok = responses["200"]
    ok["description"] = "The answer as JSON; or, streamed, " + events
    ok["content"]["text/event-stream"] = {"schema": copy.deepcopy(event)}


def _hoisted(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$defs`` moved into the components, where its refs point."""
    schema = copy.deepcopy(schema)
    for name, definition in schema.pop("$defs", {}).items():
        schemas.setdefault(name, definition)
    return schema


def _bounded(schema: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The request body's limits that come from settings, written into its schema."""
    properties = schema.get("properties", {})

    def branch(name: str, kind: str) -> dict[str, Any] | None:
        """The ``kind`` alternative of field ``name`` (FastAPI writes ``X | None`` as anyOf)."""
        field = properties.get(name)
        if field is None:
            return None
        return next((b for b in field.get("anyOf", [field]) if b.get("type") == kind), None)

    if (budget := branch("budget_ms", "integer")) is not None:
        budget["minimum"] = settings.budget_ms_min
        budget["maximum"] = settings.budget_ms_max
    for name in ("top_k", "k"):
        if (count := branch(name, "integer")) is not None:
            count["maximum"] = settings.max_top_k
    if (model := branch("model", "string")) is not None:
        model["examples"] = ["ragtime"]  # served by every backend (GET /v1/models lists all)
    for name in ("question", "query"):
        if (text := branch(name, "string")) is not None:
            text["maxLength"] = settings.question_max_chars
    return schema
