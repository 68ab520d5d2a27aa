"""Errors raised by the inference package, each carrying the HTTP status it maps to.

Hierarchy::

    InferenceError (500)
    ├── BackendUnavailable (503)  not loaded, failed to start, worker gone, or failed
    │   │                         before the first token: nothing was streamed yet
    │   └── BackendBusy (503)     every server that could take it is full (queue full):
    │                             busy, not down; try again after ``retry_after_s``
    ├── GenerationRejected (400)  the request itself is invalid for the server (prompt plus
    │                             output over its context length, a bad parameter): the
    │                             server's message; retrying it elsewhere would fail alike
    └── GenerationFailed (502)    failed after text was already streamed

Backends translate outside failures at their boundary (``raise BackendUnavailable(...) from exc``),
so callers only ever catch ``InferenceError`` and its subclasses.
"""

from __future__ import annotations


class InferenceError(Exception):
    """Base class: a generation request could not be served."""

    status_code: int = 500


class BackendUnavailable(InferenceError):
    """The backend cannot serve the request; no text was produced."""

    status_code = 503


class BackendBusy(BackendUnavailable):
    """Every server that could take the request is at capacity; none is down."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class GenerationRejected(InferenceError):
    """The server refused the request as invalid (its fault, not the server's): 400 or 422.

    Never retried on another endpoint and never counted against an endpoint's health.
    """

    status_code = 400

    def __init__(self, message: str, *, status_code: int = 400) -> None:
        super().__init__(message)
        self.status_code = status_code if status_code in (400, 422) else 400


class GenerationFailed(InferenceError):
    """The backend failed after part of the answer was streamed."""

    status_code = 502
