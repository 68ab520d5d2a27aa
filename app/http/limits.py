"""Request limits that come from configuration, checked with the same 422 shape as validation,
and the request's budget: from the body, else the ``Request-Timeout-Ms`` header, else the default.
"""

from __future__ import annotations

import json

from app.http.errors import InvalidField, InvalidHeader
from app.settings import Settings

TIMEOUT_HEADER = "Request-Timeout-Ms"
TIMEOUT_MAX_DIGITS = 12  # 10^12 ms is some 30 years: anything longer is not a timeout


def _header_budget(raw: str, settings: Settings) -> int:
    """``Request-Timeout-Ms``, clamped to the allowed range; 400 unless plain ASCII digits."""
    value = raw.strip(" \t")
    if not (value.isascii() and value.isdigit() and len(value) <= TIMEOUT_MAX_DIGITS):
        raise InvalidHeader(
            TIMEOUT_HEADER,
            f"must be a whole number of milliseconds, in at most {TIMEOUT_MAX_DIGITS} ASCII digits",
        )
    return min(max(int(value), settings.budget_ms_min), settings.budget_ms_max)


def request_budget(budget_ms: int | None, timeout_header: str | None, settings: Settings) -> int:
    """The request's budget: ``budget_ms`` from the body when given (422 outside the configured
    range), else the ``Request-Timeout-Ms`` header clamped to the range (proxies set it for every
    route; 400 when it is not a number), else the default."""
    from_header = None if timeout_header is None else _header_budget(timeout_header, settings)
    if budget_ms is not None:
        if not settings.budget_ms_min <= budget_ms <= settings.budget_ms_max:
            raise InvalidField(
                "budget_ms",
                f"must be between {settings.budget_ms_min} and {settings.budget_ms_max} ms, "
                f"got {budget_ms}",
            )
        return budget_ms
    return settings.budget_ms_default if from_header is None else from_header


def door_budget(body: bytes, timeout_header: str | None, settings: Settings) -> int:
    """The budget admission counts with, read before the route has validated anything: the
    route's own (``request_budget``, from the JSON body's ``budget_ms`` and the header), or the
    default where the route will refuse the request (400 or 422) anyway."""
    try:
        value = json.loads(body).get("budget_ms") if body else None
    except (ValueError, AttributeError, RecursionError):
        value = None
    if not isinstance(value, int) or isinstance(value, bool):
        value = None  # not a whole number: the route's 422, if it is there at all
    try:
        return request_budget(value, timeout_header, settings)
    except (InvalidField, InvalidHeader):
        return settings.budget_ms_default


def resolve_count(value: int | None, *, field: str, default: int, maximum: int) -> int:
    if value is None:
        return default
    if value > maximum:
        raise InvalidField(field, f"must be at most {maximum}, got {value}")
    return value


def check_text(text: str, *, field: str, settings: Settings) -> str:
    if len(text) > settings.question_max_chars:
        raise InvalidField(
            field,
            f"is {len(text)} characters long; the limit is {settings.question_max_chars}",
        )
    return text
