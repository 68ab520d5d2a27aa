"""Request limits that come from configuration, checked with the same 422 shape as validation."""

from __future__ import annotations

from app.config import Settings
from app.errors import InvalidField


def check_budget(budget_ms: int | None, settings: Settings) -> None:
    """A ``budget_ms`` given in the body must lie in the configured range (the ledger has it)."""
    if budget_ms is None:
        return
    if not settings.budget_ms_min <= budget_ms <= settings.budget_ms_max:
        raise InvalidField(
            "budget_ms",
            f"must be between {settings.budget_ms_min} and {settings.budget_ms_max} ms, "
            f"got {budget_ms}",
        )


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
