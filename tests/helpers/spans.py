"""Typed reads of exported spans: each read checks what it narrows, so a test fails on a span
that lacks the attribute, or holds a value of the wrong type, instead of comparing with it."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext
from opentelemetry.util.types import AnyValue


def attributes(item: ReadableSpan | Event) -> Mapping[str, AnyValue]:
    """The attributes of a span or a span event; it must have some."""
    assert item.attributes is not None, f"{item.name} has no attributes"
    return item.attributes


def number(item: ReadableSpan | Event, key: str) -> float:
    """The attribute ``key``, which must be an int or a float (not a bool)."""
    value = attributes(item)[key]
    assert isinstance(value, int | float) and not isinstance(value, bool), (key, value)
    return value


def text(item: ReadableSpan | Event, key: str) -> str:
    """The attribute ``key``, which must be a string."""
    value = attributes(item)[key]
    assert isinstance(value, str), (key, value)
    return value


def parent(span: ReadableSpan) -> SpanContext:
    """The context of the span's parent; the span must have one."""
    assert span.parent is not None, f"{span.name} has no parent"
    return span.parent
