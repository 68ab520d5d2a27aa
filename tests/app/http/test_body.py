"""``app.http.body``: a body is parsed once, and on a worker thread when it is large."""

from __future__ import annotations

import threading

import pytest
from pydantic import BaseModel, field_validator

from app.http.body import OFF_LOOP_BYTES, openapi_body, parse_body
from app.http.errors import InvalidBody
from app.http.schemas import AskRequest


class Probe(BaseModel):
    """A body that records the thread each validation ran on."""

    question: str

    @field_validator("question")
    @classmethod
    def _record(cls, value: str) -> str:
        THREADS.append(threading.current_thread())
        return value


THREADS: list[threading.Thread] = []


async def test_a_large_body_is_parsed_off_the_event_loop() -> None:
    THREADS.clear()
    small = b'{"question": "lists"}'
    large = b'{"question": "lists"' + b" " * OFF_LOOP_BYTES + b"}"
    assert (await parse_body(Probe, small)).question == "lists"
    assert (await parse_body(Probe, large)).question == "lists"
    assert THREADS[0] is threading.current_thread()
    assert THREADS[1] is not threading.current_thread()
    assert len(THREADS) == 2  # once each


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "body is empty: send a JSON object"),
        (b'{"question": tru}', "body is not valid JSON: expected ident at line 1 column 17"),
        (b"[" * 300 + b"]" * 300, "body is nested too deeply: JSON recursion limit exceeded"),
        (b'{"question": 1' + b"0" * 4400 + b"}", "body is not valid JSON: number out of range"),
    ],
)
async def test_a_body_that_is_not_json_says_so(raw: bytes, message: str) -> None:
    with pytest.raises(InvalidBody) as caught:
        await parse_body(Probe, raw)
    assert caught.value.message.startswith(message), caught.value.message
    assert caught.value.status_code == 422 and caught.value.field == "body"


def test_openapi_shows_the_body_a_route_reads_itself() -> None:
    body = openapi_body(AskRequest)["requestBody"]
    schema = body["content"]["application/json"]["schema"]
    assert body["required"] is True
    assert schema["required"] == ["question"]
    assert schema["properties"]["budget_ms"]["anyOf"][0] == {"type": "integer"}
