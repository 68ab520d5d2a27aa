"""The OpenAPI document as the service really behaves: what FastAPI derives from the routes, then
what it cannot see, added here.

- The security scheme (``Authorization: Bearer <key>``) and which operations need it
  (``/readyz`` takes a key optionally; ``/healthz`` and ``/metrics`` none).
- Every error each operation answers, with its real body: ``{"error": {"type", "message", ...}}``
  (``app.http.errors``), or OpenAI's ``{"error": {"message", "type", "param", "code"}}`` on the
  OpenAI-compatible routes; ``WWW-Authenticate`` on a 401, ``Retry-After`` on a 503. FastAPI's
  ``HTTPValidationError`` (``detail``), which the service never sends, is gone.
- The streams: ``text/event-stream`` beside JSON, with the events each sends.
- ``/metrics`` as Prometheus's text format (or OpenMetrics), not JSON.
- The bounds that come from settings: ``budget_ms``, ``top_k``/``k``, the question's length,
  and the ``Request-Timeout-Ms`` header's form.

Request bodies are read by the routes themselves, after auth (``app.http.body``); the nested models
they refer to are hoisted into ``components.schemas`` here. ``schemathesis`` checks the result
against the running service (``tests/app/http/test_schemathesis.py``).

The error responses live in ``app.http.openapi_errors``, the streams' events in
``app.http.openapi_streams``; this module puts them in FastAPI's document.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.http.openapi_errors import ERROR_SCHEMAS, error_responses
from app.http.openapi_streams import (
    ASK_EVENT_SCHEMA,
    ASK_EVENTS,
    CHAT_EVENT_SCHEMA,
    CHAT_EVENTS,
    DONE_EVENT_SCHEMA,
    STREAM_SCHEMAS,
    add_stream,
)
from app.http.schemas import Report
from app.settings import Settings

SCHEME = "ApiKey"
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/redoc"})

READINESS_SCHEMA: dict[str, Any] = {
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
}


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
    schemas["Readiness"] = copy.deepcopy(READINESS_SCHEMA)
    schemas.update(copy.deepcopy(STREAM_SCHEMAS))
    schemas["Report"] = _hoisted(
        Report.model_json_schema(ref_template="#/components/schemas/{model}"), schemas
    )
    schemas["DoneEvent"] = copy.deepcopy(DONE_EVENT_SCHEMA)
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
    responses.update(error_responses(path))
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
        add_stream(responses, ASK_EVENTS, ASK_EVENT_SCHEMA)
    elif path == "/v1/chat/completions":
        add_stream(responses, CHAT_EVENTS, CHAT_EVENT_SCHEMA)
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
