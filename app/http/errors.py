"""Errors at the HTTP boundary: every failure leaves as ``{"error": {"type", "message", ...}}``.

Each package raises its own exceptions, each carrying an HTTP ``status_code``; the handlers here
translate them once. 503s carry ``Retry-After``. Validation errors name the field that was wrong
(``body`` for a body that is not JSON, the header's name for a bad header). What a client can get
wrong is a 4xx, never a 5xx: the error-ratio alert counts 5xx only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.keys.ratelimit import RateLimited
from app.safety.moderation import QuestionRejected
from inference import BackendBusy, GenerationRejected, InferenceError
from retrieval import BrokenIndex, InvalidFilter, LimitExceeded, RetrievalError
from tracing.budget import BudgetError


class ApiError(Exception):
    """An error the service reports to its caller as it is."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        type: str = "error",
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.type = type
        self.field = field
        self.headers = headers


class Unauthorized(ApiError):
    def __init__(self, message: str) -> None:
        super().__init__(401, message, type="unauthorized", headers={"WWW-Authenticate": "Bearer"})


class Forbidden(ApiError):
    """A valid key without the scope a route needs (403)."""

    def __init__(self, scope: str) -> None:
        super().__init__(
            403,
            f"this API key lacks the {scope!r} scope this route needs; "
            f"create one with `ragtime keys create NAME --scope {scope}`",
            type="forbidden",
        )


class KeyStoreDown(ApiError):
    """The key store (a database) cannot be reached: no key can be checked (503)."""

    def __init__(self, message: str) -> None:
        super().__init__(503, f"{message}; retry later", type="key_store_unavailable")


def limit_setting(limit: str) -> str:
    """The setting of an ingest limit: ``max_pages`` is ``RAGTIME_INGEST_MAX_PAGES``."""
    return f"RAGTIME_INGEST_{limit.upper()}"


class UploadNotStored(ApiError):
    """The server could not write an upload down to ingest it (507: a full disk, say); nothing
    of it was ingested."""

    def __init__(self, reason: str) -> None:
        super().__init__(
            507,
            f"the upload could not be stored ({reason}); nothing was ingested",
            type="insufficient_storage",
        )


class ModelNotFound(ApiError):
    """A model this service does not serve (404, OpenAI's ``model_not_found``)."""

    def __init__(self, model: str) -> None:
        super().__init__(
            404,
            f"The model '{model}' does not exist: GET /v1/models lists the models served",
            type="model_not_found",
            field="model",
        )


class InvalidField(ApiError):
    """A value that passed type checks but breaks a configured limit (422)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(422, f"{field}: {message}", type="invalid_request", field=field)


class InvalidBody(ApiError):
    """A body that is not a JSON document at all: empty, malformed, nested too deeply (422)."""

    def __init__(self, message: str) -> None:
        super().__init__(422, message, type="invalid_request", field="body")


class InvalidHeader(ApiError):
    """A request header whose value cannot be read (400), named as the ``field``."""

    def __init__(self, header: str, message: str) -> None:
        super().__init__(400, f"{header}: {message}", type="invalid_header", field=header)


class BodyTooLarge(ApiError):
    """A body over the configured limit, refused before it is read whole (413)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            413, f"request body is larger than the limit of {limit} bytes", type="body_too_large"
        )


class UnsupportedMediaType(ApiError):
    """A body that does not say it is JSON (415)."""

    def __init__(self, message: str) -> None:
        super().__init__(415, message, type="unsupported_media_type")


class ClientGone(ApiError):
    """The client went away before its request was read (499, nginx's "client closed request").

    Nobody reads this answer; its status keeps a disconnect out of the 5xx that alert.
    """

    def __init__(self, message: str) -> None:
        super().__init__(499, message, type="client_closed_request")


class ShuttingDown(ApiError):
    """The server is shutting down: a stream that outlived the grace period ends with this."""

    def __init__(self) -> None:
        super().__init__(
            503,
            "the server is shutting down; the answer was cut short, ask again",
            type="shutting_down",
        )


#: What may end a stream once it has begun: the backend's failure, the budget running out
#: before a useful answer, the server shutting down (every ``ApiError``).
STREAM_FAILURES = (InferenceError, BudgetError, ApiError)


def stream_error(exc: InferenceError | BudgetError | ApiError) -> tuple[str, str]:
    """The error type and message that a stream already begun sends, in its own shape, for
    one of ``STREAM_FAILURES``: its status line has gone, so the type must say what failed."""
    if isinstance(exc, ApiError):
        return exc.type, exc.message
    if isinstance(exc, BudgetError):
        return exc.error_type, str(exc)
    if isinstance(exc, BackendBusy):
        return "backend_busy", str(exc)
    kind = "backend_unavailable" if exc.status_code == 503 else "generation_failed"
    return kind, str(exc)


def error_body(type: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": {"type": type, "message": message, **extra}}


def _field_path(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) or "body"


def install_error_handlers(app: FastAPI, *, retry_after_s: int) -> None:
    """Register one handler per error family on ``app``."""

    def respond(
        status: int, body: dict[str, Any], headers: Mapping[str, str] | None = None
    ) -> JSONResponse:
        merged = dict(headers or {})
        if status == 503:
            merged.setdefault("Retry-After", str(retry_after_s))
        return JSONResponse(body, status_code=status, headers=merged)

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        extra = {"field": exc.field} if exc.field else {}
        return respond(exc.status_code, error_body(exc.type, exc.message, **extra), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"field": _field_path(tuple(e.get("loc", ()))), "message": e.get("msg", "")}
            for e in exc.errors()
        ]
        message = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return respond(422, error_body("invalid_request", message, errors=errors))

    @app.exception_handler(BudgetError)
    async def _budget(_: Request, exc: BudgetError) -> JSONResponse:
        # No plan fits, or the deadline came first (504); the target's queue is full (503).
        return respond(exc.status_code, error_body(exc.error_type, str(exc)))

    @app.exception_handler(RateLimited)
    async def _rate_limited(_: Request, exc: RateLimited) -> JSONResponse:
        headers = {"Retry-After": str(exc.retry_after_s)}
        return respond(exc.status_code, error_body(exc.error_type, str(exc)), headers)

    @app.exception_handler(QuestionRejected)
    async def _rejected(_: Request, exc: QuestionRejected) -> JSONResponse:
        return respond(400, error_body("moderation_rejected", str(exc), score=exc.score))

    @app.exception_handler(RetrievalError)
    async def _retrieval(_: Request, exc: RetrievalError) -> JSONResponse:
        kind = {404: "not_found", 409: "embedding_mismatch"}.get(exc.status_code, "retrieval_error")
        if isinstance(exc, BrokenIndex):
            kind = "index_unavailable"
        if isinstance(exc, InvalidFilter):  # a search filter that cannot apply: name it
            body = error_body("invalid_request", str(exc), field=exc.field)
            return respond(exc.status_code, body)
        if isinstance(exc, LimitExceeded):  # an upload's file: name the setting to raise
            setting = limit_setting(exc.limit)
            message = f"{exc}; the limit is {setting}. Nothing of this upload was ingested"
            return respond(exc.status_code, error_body("limit_exceeded", message, limit=setting))
        return respond(exc.status_code, error_body(kind, str(exc)))

    @app.exception_handler(InferenceError)
    async def _inference(_: Request, exc: InferenceError) -> JSONResponse:
        headers: dict[str, str] = {}
        if isinstance(exc, GenerationRejected):  # the server found the request invalid
            kind = "generation_rejected"
        elif isinstance(exc, BackendBusy):
            kind = "backend_busy"
            if exc.retry_after_s is not None:
                headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_s)))
        elif exc.status_code == 503:
            kind = "backend_unavailable"
        else:
            kind = "generation_failed"
        return respond(exc.status_code, error_body(kind, str(exc)), headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return respond(exc.status_code, error_body("http_error", str(exc.detail)), exc.headers)
