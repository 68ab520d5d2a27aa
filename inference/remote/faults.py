"""Whose fault a failed generation request is, and what the caller gets for it.

A remote server fails a request in one of a few ways: an error status instead of a stream
(``Rejected``), an error event or a server's abort inside the stream (``error_event``; the
decoders raise ``StreamError``), or a broken connection (an ``httpx`` error). Each is the
request's own fault, a full server's (busy), a broken server's, or ours (a configuration the
server refuses). ``fault_of`` decides by the status and SGLang's ``retryable`` flag;
``FAILS_THE_REQUEST`` is what the request's and ours become before the first delta (the busy and
the server's fault move on to the next endpoint, see ``inference.remote.http_stream``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

import httpx

from inference.errors import BackendUnavailable, GenerationRejected, InferenceError
from inference.remote.endpoints import EMPTY_POOL_CODES

Fault = Literal["request", "busy", "server", "config"]
"""Whose fault a failure is: the request's, a full server's, a broken server's, or ours."""

_REQUEST_STATUSES = frozenset({400, 413, 422})
_BUSY_STATUSES = frozenset({429, 503})


def fault_of(status: int | None, retryable: bool | None = None) -> Fault:
    """Classify by an HTTP-like status (and SGLang's ``retryable`` flag, which wins when
    false); no status and no flag is the server's."""
    if retryable is False or (status is not None and status in _REQUEST_STATUSES):
        return "request"
    if status is None:
        return "server"
    if status in _BUSY_STATUSES:
        return "busy"
    if 400 <= status < 500 and status != 408:
        return "config"
    return "server"


class StreamError(Exception):
    """The request failed: an error event, an abort by the server, bad data, an error status.

    ``status`` is the status the server gave (None: none) and ``fault`` whose fault it is.
    """

    def __init__(
        self, message: str, *, status: int | None = None, fault: Fault | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.fault: Fault = fault or fault_of(status)


class Rejected(StreamError):
    """The server answered the request with an error status instead of a stream; ``code`` is
    the error's ``code`` when its body gave one. A gateway without a worker for the model is the
    server's fault (an empty pool), whatever its status."""

    def __init__(self, status_code: int, detail: str, code: str | None = None) -> None:
        empty = code in EMPTY_POOL_CODES
        if empty:
            detail = f"no worker serves the model behind this gateway ({code}: {detail})"
        super().__init__(
            f"HTTP {status_code}: {detail}",
            status=status_code,
            fault="server" if empty else None,
        )
        self.status_code = status_code
        self.code = code


def error_event(chunk: Mapping[str, Any]) -> StreamError:
    """An in-stream ``{"error": {"message", "type", "code", "retryable"}}`` (SGLang 0.5.23's
    ``serve_generate_request``, vLLM's ``create_streaming_error_response``; older vLLM sends
    the error object itself, ``{"object": "error", "message", "type", "code"}``)."""
    error = chunk if chunk.get("object") == "error" else chunk.get("error")
    status: int | None = None
    retryable: bool | None = None
    if isinstance(error, Mapping):
        code = error.get("code")
        if isinstance(code, int) and not isinstance(code, bool):
            status = code
        elif isinstance(code, str) and code.isdigit():
            status = int(code)
        flag = error.get("retryable")
        retryable = flag if isinstance(flag, bool) else None
        if status is None and error.get("type") == "invalid_request_error":
            status = 400
    return StreamError(
        f"error event: {error_message({'error': error})}",
        status=status,
        fault=fault_of(status, retryable),
    )


async def rejection_detail(response: httpx.Response) -> tuple[str, str | None]:
    """The error message of a non-200 answer, read leniently and briefly, and its ``code``
    (``{"error": {"code": "model_not_found", ...}}``) when it has a string one."""
    try:
        raw = await response.aread()
    except httpx.HTTPError:
        return response.reason_phrase, None
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:200].decode(errors="replace") or response.reason_phrase, None
    if not isinstance(body, dict):
        return str(body)[:200], None
    error = body.get("error")
    code = error.get("code") if isinstance(error, Mapping) else None
    return error_message(body), code if isinstance(code, str) else None


def error_message(body: Mapping[str, Any]) -> str:
    """``{"error": {"message": ...}}`` (SGLang, OpenAI), ``{"error": "..."}`` or ``{"detail"}``."""
    error = body.get("error", body.get("detail", body))
    if isinstance(error, Mapping):
        return str(error.get("message") or error)[:500]
    return str(error)[:500]


#: The context length in SGLang's refusals (``managers/tokenizer_manager.py``): "... longer than
#: the model's context length (4096 tokens)", "... maximum context length of 4096 tokens".
_CONTEXT_IN_REFUSAL = re.compile(r"context length (?:of |\()(\d+) tokens")


def context_length_in(message: str) -> int | None:
    match = _CONTEXT_IN_REFUSAL.search(message)
    return int(match.group(1)) if match else None


def describe(exc: BaseException, timeout: httpx.Timeout) -> str:
    if isinstance(exc, httpx.ConnectError):
        return f"connection failed ({exc or type(exc).__name__})"
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {timeout.connect} s"
    if isinstance(exc, httpx.ReadTimeout):
        return f"stalled: no data within {timeout.read} s"
    if isinstance(exc, httpx.HTTPError):
        return f"{type(exc).__name__}: {exc}"
    return str(exc)


#: What a failure before the first delta becomes when it is not the endpoint's (busy or down):
#: the caller's error, or ours. Built from the backend's name, the message and the status.
FAILS_THE_REQUEST: dict[Fault, Callable[[str, str, int | None], InferenceError]] = {
    "request": lambda name, message, status: GenerationRejected(
        f"{name} rejected the request: {message}", status_code=422 if status == 422 else 400
    ),
    "config": lambda name, message, status: BackendUnavailable(
        f"{name} refused the request: {message}"
    ),
}
