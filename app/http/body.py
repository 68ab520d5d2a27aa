"""JSON request bodies, read only after the key is checked: bounded, then parsed once.

``read_body`` refuses a body over the limit while reading it: at once when Content-Length says
it is too large, else as soon as the chunks counted so far pass the limit, so an oversized body
is never held whole. (Starlette's and FastAPI's ``max_body_size`` count the same way, but answer
a plain-text 413, and when Content-Length is over the limit they put it in place of any other
answer, a 401 included. Here the 413 has the service's JSON error shape and comes after auth.)

``parse_body`` parses and validates in one pass, with pydantic's ``model_validate_json``. A body
over ``OFF_LOOP_BYTES`` is parsed on a worker thread, off the event loop. The parser refuses JSON
nested more than about 200 levels deep; that error, and every other syntax error, is reported with
its line and column.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any, TypeVar

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request

from app.http.errors import BodyTooLarge, ClientGone, InvalidBody, UnsupportedMediaType

OFF_LOOP_BYTES = 16 * 1024
"""Bodies larger than this are parsed on a worker thread."""

Model = TypeVar("Model", bound=BaseModel)


def is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _declared_over(content_length: str, limit: int) -> bool:
    """Whether Content-Length (when it is a number) says the body is over ``limit``."""
    if not (content_length.isascii() and content_length.isdigit()):
        return False  # the server checks the header; the counting below still holds
    return len(content_length) > len(str(limit)) or int(content_length) > limit


async def bounded_stream(request: Request, limit: int) -> AsyncGenerator[bytes, None]:
    """The body's chunks, refused (413) as soon as they pass ``limit`` bytes, or at once when
    Content-Length says they will."""
    if _declared_over(request.headers.get("content-length", ""), limit):
        raise BodyTooLarge(limit)
    seen = 0
    try:
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > limit:
                raise BodyTooLarge(limit)
            yield chunk
    except ClientDisconnect as exc:
        raise ClientGone("the client went away before its request body ended") from exc


async def read_body(request: Request, limit: int) -> bytes:
    """The body, if it says it is JSON (else 415) and is at most ``limit`` bytes (else 413)."""
    if not is_json(request.headers.get("content-type", "")):
        raise UnsupportedMediaType("send the body as JSON, with 'Content-Type: application/json'")
    body = bytearray()
    async for chunk in bounded_stream(request, limit):
        body += chunk
    return bytes(body)


def _syntax_message(detail: str) -> str:
    detail = detail.removeprefix("Invalid JSON: ")
    if detail.startswith("recursion limit exceeded"):
        return f"body is nested too deeply: JSON {detail}"
    return f"body is not valid JSON: {detail}"


async def parse_body(model: type[Model], raw: bytes) -> Model:
    """``raw`` parsed and validated as ``model``: 422 naming the body or each field wrong."""
    if not raw:
        raise InvalidBody("body is empty: send a JSON object")
    try:
        if len(raw) > OFF_LOOP_BYTES:
            return await asyncio.to_thread(model.model_validate_json, raw)
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        syntax = next((e["msg"] for e in errors if e["type"] == "json_invalid"), None)
        if syntax is not None:
            raise InvalidBody(_syntax_message(syntax)) from exc
        raise RequestValidationError(errors) from exc


def openapi_body(model: type[BaseModel]) -> dict[str, Any]:
    """``openapi_extra`` for a route that reads its body itself: the body OpenAPI shows."""
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": schema}},
        }
    }
