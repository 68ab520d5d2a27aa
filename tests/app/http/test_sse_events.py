"""The stream's ``token`` events, encoded by ragtime itself, are the bytes sse-starlette writes."""

from __future__ import annotations

import json

import pytest
from sse_starlette.event import ensure_bytes

from app.http.routes.ask import token_event
from tests.helpers.sse import parse_sse


@pytest.mark.parametrize("text", ["word ", "two\nlines\r\n", 'a "quote" \\ back', "ünïcode ✓", ""])
def test_a_token_event_is_what_sse_starlette_would_send(text: str) -> None:
    event = {"event": "token", "data": json.dumps({"text": text})}
    assert token_event(text) == ensure_bytes(event, "\r\n")
    assert parse_sse(token_event(text).decode().split("\n")) == [("token", {"text": text})]
