"""Bad input and faults: each gets a clear JSON error, and nothing is half-written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from app.keys.auth import KeyStore
from tests.fakes.backends import (
    ScriptedBackend,
    failing_midstream_backend,
    unavailable_backend,
)
from tests.helpers.app import make_settings, running_app
from tests.helpers.sse import parse_sse


@pytest.fixture(scope="module")
def scripted_client(
    seeded_data_dir: Path, span_exporter: InMemorySpanExporter
) -> Iterator[TestClient]:
    with running_app(seeded_data_dir, backend=ScriptedBackend()) as client:
        yield client


class JsonBody(Protocol):
    """A response (the test client's, from httpx or httpx2) read as JSON."""

    def json(self) -> Any: ...


def error_of(response: JsonBody) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert body["error"]["message"]
    return body["error"]


@pytest.mark.parametrize(
    ("headers", "fragment"),
    [
        ({}, "missing API key"),
        ({"Authorization": "Basic abc"}, "malformed Authorization header"),
        ({"Authorization": "Bearer rt_not-a-real-key"}, "invalid or revoked"),
    ],
)
def test_missing_or_wrong_key_is_401(
    scripted_client: TestClient, headers: dict[str, str], fragment: str
) -> None:
    response = scripted_client.post("/v1/ask", json={"question": "hi"}, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert fragment in error_of(response)["message"]


def test_revoked_key_is_401(scripted_client: TestClient, seeded_data_dir: Path) -> None:
    keys = KeyStore(make_settings(seeded_data_dir).keys_path)
    key, secret = keys.create("short-lived")
    keys.revoke(key.id)
    keys.close()
    response = scripted_client.post(
        "/v1/ask", json={"question": "hi"}, headers={"Authorization": f"Bearer {secret}"}
    )
    assert response.status_code == 401


def test_malformed_json_is_422(scripted_client: TestClient, auth: dict[str, str]) -> None:
    response = scripted_client.post(
        "/v1/ask",
        content=b'{"question": "unterminated',
        headers={**auth, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert error_of(response)["type"] == "invalid_request"


@pytest.mark.parametrize(
    ("payload", "field", "fragment"),
    [
        ({"question": 12}, "question", "valid string"),
        ({"question": "ok", "top_k": "many"}, "top_k", "valid integer"),
        ({"question": "ok", "top_k": 0}, "top_k", "greater than or equal to 1"),
        ({"question": "   "}, "question", "at least 1 character"),
        ({}, "question", "Field required"),
        ({"question": "ok", "colour": "blue"}, "colour", "Extra inputs"),
        ({"question": "x" * 2001}, "question", "the limit is 2000"),
        ({"question": "ok", "budget_ms": 10}, "budget_ms", "between 50 and 120000"),
        ({"question": "ok", "budget_ms": 10**7}, "budget_ms", "between 50 and 120000"),
        ({"question": "ok", "top_k": 500}, "top_k", "at most 20"),
    ],
)
def test_invalid_fields_are_422_naming_the_field(
    scripted_client: TestClient,
    auth: dict[str, str],
    payload: dict[str, object],
    field: str,
    fragment: str,
) -> None:
    response = scripted_client.post("/v1/ask", json=payload, headers=auth)
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["message"].startswith(field) or f"{field}:" in error["message"]
    assert fragment in error["message"]


def test_unknown_collection_is_404(scripted_client: TestClient, auth: dict[str, str]) -> None:
    for route, key in (("/v1/ask", "question"), ("/v1/search", "query")):
        response = scripted_client.post(
            route, json={key: "lists", "collection": "nope"}, headers=auth
        )
        assert response.status_code == 404
        error = error_of(response)
        assert error["type"] == "not_found"
        assert "'nope'" in error["message"] and "demo" not in error["message"]  # no other named


def test_abusive_question_is_400_before_retrieval(
    scripted_client: TestClient, auth: dict[str, str], spans: InMemorySpanExporter
) -> None:
    response = scripted_client.post(
        "/v1/ask", json={"question": "you stupid fucking idiot, explain lists"}, headers=auth
    )
    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "moderation_rejected"
    assert "abusive or profane" in error["message"]
    names = {s.name for s in spans.get_finished_spans()}
    assert "moderate.question" in names and "embed" not in names


def test_backend_down_is_503_with_retry_after_and_an_error_trace(
    seeded_data_dir: Path, auth: dict[str, str], spans: InMemorySpanExporter
) -> None:
    """A JSON answer gets the 503; a stream has begun with its evidence, so it ends with the
    same error as its event."""
    with running_app(seeded_data_dir, backend=unavailable_backend()) as client:
        question = {"question": "What is a list?"}
        response = client.post("/v1/ask", json=question, headers=auth)
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "5"
        error = error_of(response)
        assert error["type"] == "backend_unavailable"
        assert "backend is down" in error["message"]
        streamed = client.post("/v1/ask", json={**question, "stream": True}, headers=auth)
        assert streamed.status_code == 200
        events = parse_sse(streamed.iter_lines())
        assert [name for name, _ in events] == ["citations", "error"]
        assert events[0][1]["citations"], "the passages came first"
        assert events[1][1]["error"]["type"] == "backend_unavailable"
        assert "backend is down" in events[1][1]["error"]["message"]
    finished = spans.get_finished_spans()
    generate = [s for s in finished if s.name == "generate"]
    roots = [s for s in finished if s.kind == SpanKind.SERVER and s.name == "POST /v1/ask"]
    assert len(generate) == 2 and len(roots) == 2
    assert all(s.status.status_code == StatusCode.ERROR for s in generate + roots)


def test_backend_failing_mid_stream_sends_an_error_event(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    with running_app(seeded_data_dir, backend=failing_midstream_backend()) as client:
        with client.stream(
            "POST", "/v1/ask", json={"question": "What is a list?", "stream": True}, headers=auth
        ) as response:
            assert response.status_code == 200
            events = parse_sse(response.iter_lines())
        kinds = [kind for kind, _ in events]
        assert kinds[-1] == "error" and "done" not in kinds
        assert events[-1][1]["error"]["type"] == "generation_failed"
        response = client.post("/v1/ask", json={"question": "What is a list?"}, headers=auth)
        assert response.status_code == 502
        assert "decoder crashed" in error_of(response)["message"]


def test_answers_are_redacted_and_cited_labels_marked(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    backend = ScriptedBackend(
        ("Write to ", "jane.doe@exa", "mple.com or call ", "555-123-4567", ", see [2]."),
    )
    with running_app(seeded_data_dir, backend=backend) as client:
        response = client.post("/v1/ask", json={"question": "What is a list?"}, headers=auth)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answer"] == "Write to [email redacted] or call [phone redacted], see [2]."
    assert [c["cited"] for c in body["citations"]][:2] == [False, True]
