"""Keeps secrets out of the access log and the request spans: credentials sent in a query
string are redacted.

ragtime reads its API key from the ``Authorization`` header only, but a client may still put a
key in the URL (``?api_key=...``), and uvicorn's access log writes the whole path with its query
string. ``RedactQuerySecrets`` is a logging filter on ``uvicorn.access`` that masks the values of
such parameters before any handler sees the record. The OpenTelemetry instrumentation puts the
URL on the request's span (``http.url``, ``http.target``, ``url.full``, ``url.query``):
``redact_span_url``, its server request hook, masks them there.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from opentelemetry.trace import Span

#: Query parameters whose values are credentials, whatever their case.
SECRET_PARAMS = ("key", "api_key", "apikey", "token", "access_token", "auth", "authorization")
_SECRET_VALUE = re.compile(r"(?i)([?&](?:" + "|".join(SECRET_PARAMS) + r")=)[^&#\s\"]*")
REDACTED = "[redacted]"


def redact(text: str) -> str:
    """``text`` with the values of credential query parameters replaced."""
    return _SECRET_VALUE.sub(lambda m: m.group(1) + REDACTED, text)


class RedactQuerySecrets(logging.Filter):
    """Masks credential query parameters in a record's arguments (uvicorn passes the path as
    one of them) and message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


#: The span attributes in which the OpenTelemetry instrumentation writes the request's URL.
URL_ATTRIBUTES = ("http.url", "http.target", "url.full", "url.query")


def redact_span_url(span: Span, scope: dict[str, Any]) -> None:
    """The instrumentation's server request hook: mask credentials in the span's URLs."""
    if not span.is_recording() or not scope.get("query_string"):
        return
    held = getattr(span, "attributes", None) or {}
    for name in URL_ATTRIBUTES:
        value = held.get(name)
        if not isinstance(value, str):
            continue
        masked = redact("?" + value)[1:] if name == "url.query" else redact(value)
        if masked != value:
            span.set_attribute(name, masked)


def install() -> None:
    """Add the filter to uvicorn's access logger, once per process."""
    logger = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQuerySecrets) for f in logger.filters):
        logger.addFilter(RedactQuerySecrets())
