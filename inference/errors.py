"""Errors raised by the inference package, each carrying the HTTP status it maps to.

Hierarchy::

    InferenceError (500)
    ├── BackendUnavailable (503)  not loaded, failed to start, worker gone, or failed
    │                             before the first token: nothing was streamed yet
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


class GenerationFailed(InferenceError):
    """The backend failed after part of the answer was streamed."""

    status_code = 502
