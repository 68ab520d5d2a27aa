"""The front door: what reaches the pipeline, and what no request can do to the service.

The key is checked before a byte of the body is read; the body is bounded in size, parsed once
and strictly typed; a malformed ``Request-Timeout-Ms`` is the caller's error. No request here gets
a 500, with a key or without one, so none can page the on-call: 4xx answers count in the error
ratio's denominator only. The app is built from doubles (no model is loaded).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from starlette.types import Message

from app.main import create_app
from app.settings import Settings
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import (
    asgi_client,
    create_key,
    make_settings,
    seed_data_dir,
    services_of_doubles,
)
from tests.helpers.spans import attributes, parent
from tracing.alerts import AlertEvaluator

KIB = 1024
MIB = 1024 * KIB
QUESTION = b'"question": "How do I give a parameter a default value?"'


class Body:
    """A request body the app pulls chunk by chunk; ``pulled`` counts the chunks it took."""

    def __init__(self, data: bytes = b"", *, filler: int = 0, chunk: int = 64 * KIB) -> None:
        self.data = data
        self.filler = filler  # bytes of b"x" sent after ``data``, made as they are pulled
        self.chunk = chunk
        self.pulled = 0

    def __len__(self) -> int:
        return len(self.data) + self.filler

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.data), self.chunk):
            self.pulled += 1
            yield self.data[start : start + self.chunk]
        for start in range(0, self.filler, self.chunk):
            self.pulled += 1
            yield b"x" * min(self.chunk, self.filler - start)


@dataclass(frozen=True)
class Case:
    """A bad request, and what it gets with a valid key: its status and a part of its message."""

    name: str
    body: bytes = b"{" + QUESTION + b"}"
    filler: int = 0  # bytes of filler after ``body``
    declared: bool = True  # send Content-Length (else the body is chunked, length unknown)
    content_type: str | None = "application/json"
    headers: dict[str, str | bytes] = field(default_factory=dict)
    route: str = "/v1/ask"
    status: int = 422
    fragment: str = ""
    field: str | None = None

    def new_body(self) -> Body:
        return Body(self.body, filler=self.filler)


DEEP = b"{" + QUESTION + b', "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"

CASES = [
    Case("deep JSON", DEEP, fragment="nested too deeply", field="body"),
    Case("deep JSON, no Content-Type", DEEP, content_type=None, status=415, fragment="JSON"),
    Case(
        "superscript-two timeout header",
        headers={"Request-Timeout-Ms": b"\xb2"},  # latin-1 '²': str.isdigit() says yes
        status=400,
        fragment="Request-Timeout-Ms",
        field="Request-Timeout-Ms",
    ),
    Case(
        "4301-digit timeout header",
        headers={"Request-Timeout-Ms": "9" * 4301},
        status=400,
        fragment="Request-Timeout-Ms",
        field="Request-Timeout-Ms",
    ),
    Case("20 MB body with Content-Length", filler=20 * MIB, status=413, fragment="65536 bytes"),
    Case("20 MB body, chunked", filler=20 * MIB, declared=False, status=413, fragment="65536"),
    Case(
        "malformed JSON",
        b'{"question": "unterminated',
        fragment="body is not valid JSON: EOF while parsing a string at line 1 column 26",
        field="body",
    ),
    Case("empty body", b"", fragment="body is empty", field="body"),
    Case("budget_ms as a string", b"{" + QUESTION + b', "budget_ms": "1000"}', field="budget_ms"),
    Case("budget_ms as a float", b"{" + QUESTION + b', "budget_ms": 1000.0}', field="budget_ms"),
    Case("budget_ms in exponent", b"{" + QUESTION + b', "budget_ms": 1e3}', field="budget_ms"),
    Case("budget_ms as a bool", b"{" + QUESTION + b', "budget_ms": true}', field="budget_ms"),
    Case("top_k as a string", b"{" + QUESTION + b', "top_k": "3"}', field="top_k"),
    Case("top_k as a float", b"{" + QUESTION + b', "top_k": 3.0}', field="top_k"),
    Case("k as a float", b'{"query": "defaults", "k": 2.0}', route="/v1/search", field="k"),
    Case("k as a bool", b'{"query": "defaults", "k": true}', route="/v1/search", field="k"),
    Case(
        "search budget_ms as a string",
        b'{"query": "defaults", "budget_ms": "900"}',
        route="/v1/search",
        field="budget_ms",
    ),
]


@pytest.fixture(scope="module")
def door(tmp_path_factory: pytest.TempPathFactory, corpus_dir: Path) -> tuple[Settings, str]:
    """Settings over a data dir ingested with doubles, and a valid key's secret."""
    settings = make_settings(tmp_path_factory.mktemp("front-door"))
    seed_data_dir(settings.data_dir, corpus_dir, HashEmbedder())
    return settings, create_key(settings.data_dir)


@pytest.fixture
def key(door: tuple[Settings, str]) -> dict[str, str]:
    return {"Authorization": f"Bearer {door[1]}"}


@pytest.fixture
async def client(
    door: tuple[Settings, str], span_exporter: InMemorySpanExporter
) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(services=services_of_doubles(door[0]))) as client:
        yield client


async def send(
    client: httpx.AsyncClient, case: Case, auth: dict[str, str]
) -> tuple[httpx.Response, Body]:
    body = case.new_body()
    headers: dict[str, str | bytes] = {**case.headers, **auth}
    if case.content_type is not None:
        headers["Content-Type"] = case.content_type
    if case.declared:
        headers["Content-Length"] = str(len(body))
    raw = [(k.encode(), v if isinstance(v, bytes) else v.encode()) for k, v in headers.items()]
    return await client.post(case.route, content=body, headers=raw), body


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The error of a response in the service's JSON shape (a dict with one key, ``error``)."""
    assert response.headers["content-type"] == "application/json", response.text[:300]
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert error["message"]
    return error


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_without_a_key_a_bad_request_is_401_and_its_body_is_never_read(
    client: httpx.AsyncClient, case: Case
) -> None:
    response, body = await send(client, case, {})
    assert response.status_code == 401, response.text[:300]
    assert "missing API key" in error_of(response)["message"]
    assert body.pulled == 0


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_with_a_key_a_bad_request_is_a_4xx_that_says_what_is_wrong(
    client: httpx.AsyncClient, key: dict[str, str], case: Case
) -> None:
    response, body = await send(client, case, key)
    assert response.status_code == case.status, response.text[:300]
    error = error_of(response)
    assert case.fragment in error["message"], error
    if case.field is not None:
        assert error.get("field", error["message"].split(":")[0]) == case.field, error
    if case.status == 413:  # refused as it is read: never more than the limit and one chunk
        assert body.pulled <= (0 if case.declared else 2), body.pulled


async def test_malformed_json_is_reported_by_line_and_column_not_a_byte_offset(
    client: httpx.AsyncClient, key: dict[str, str]
) -> None:
    raw = b'{\n  "question": "lists",\n  "top_k": 3,\n}'
    response = await client.post(
        "/v1/ask", content=raw, headers={**key, "Content-Type": "application/json"}
    )
    assert response.status_code == 422
    error = error_of(response)
    assert error["type"] == "invalid_request" and error["field"] == "body"
    assert error["message"].startswith("body is not valid JSON: ")
    assert "line 4 column 1" in error["message"], error


async def test_a_body_over_a_configured_limit_is_413(
    door: tuple[Settings, str], key: dict[str, str], span_exporter: InMemorySpanExporter
) -> None:
    settings = door[0].model_copy(update={"max_body_bytes": 2 * KIB})
    padded = b"{" + QUESTION + b"," + b" " * 3000 + b'"top_k": 2}'
    async with asgi_client(create_app(services=services_of_doubles(settings))) as client:
        headers = {**key, "Content-Type": "application/json"}
        response = await client.post("/v1/ask", content=padded, headers=headers)
        small = await client.post(
            "/v1/ask", content=padded.replace(b" " * 3000, b""), headers=headers
        )
    assert response.status_code == 413
    assert error_of(response)["message"] == ("request body is larger than the limit of 2048 bytes")
    assert small.status_code == 200, small.text


def test_the_body_limit_defaults_to_64_kib(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings(_env_file=None).max_body_bytes == 64 * KIB
    monkeypatch.setenv("RAGTIME_MAX_BODY_BYTES", "1048576")
    assert Settings(_env_file=None).max_body_bytes == MIB


async def test_a_json_content_type_is_required(
    client: httpx.AsyncClient, key: dict[str, str]
) -> None:
    response = await client.post(
        "/v1/ask", content=b"{" + QUESTION + b"}", headers={**key, "Content-Type": "text/plain"}
    )
    assert response.status_code == 415
    assert "application/json" in error_of(response)["message"]


async def test_a_client_gone_before_its_body_ended_is_not_a_server_error(
    door: tuple[Settings, str], key: dict[str, str], span_exporter: InMemorySpanExporter
) -> None:
    app = create_app(services=services_of_doubles(door[0]))
    sent: list[Message] = []
    messages: list[Message] = [
        {"type": "http.request", "body": b'{"question": "li', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> Message:
        return messages.pop(0)

    async def record(message: Message) -> None:
        sent.append(message)

    headers = [
        (b"content-type", b"application/json"),
        (b"authorization", key["Authorization"].encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/ask",
        "raw_path": b"/v1/ask",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("ragtime", 80),
    }
    async with app.router.lifespan_context(app):
        await app(scope, receive, record)
    (start,) = [m for m in sent if m["type"] == "http.response.start"]
    assert start["status"] == 499


async def test_an_integer_budget_ms_is_the_requests_budget_auth_stage_included(
    client: httpx.AsyncClient, key: dict[str, str], spans: InMemorySpanExporter
) -> None:
    response = await client.post(
        "/v1/ask",
        json={"question": "How do I give a parameter a default value?", "budget_ms": 7000},
        headers={**key, "Request-Timeout-Ms": "9000"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["budget"]["budget_ms"] == 7000
    trace_id = int(response.json()["trace_id"], 16)
    exported = [s for s in spans.get_finished_spans() if s.context.trace_id == trace_id]
    (auth,) = [s for s in exported if s.name == "auth"]
    (root,) = [s for s in exported if s.kind == SpanKind.SERVER]
    assert parent(auth).span_id == root.context.span_id
    assert attributes(auth)["ragtime.budget.budget_ms"] == 7000
    assert attributes(auth)["ragtime.auth.key_id"] == 1
    assert root.start_time is not None and auth.start_time is not None
    assert auth.end_time is not None and root.end_time is not None
    assert root.start_time <= auth.start_time <= auth.end_time <= root.end_time


@pytest.mark.parametrize(("header", "expected"), [("9000", 9000), ("99999999", 120000)])
async def test_the_timeout_header_budget_is_clamped_and_the_body_wins(
    client: httpx.AsyncClient, key: dict[str, str], header: str, expected: int
) -> None:
    question = {"question": "How do I give a parameter a default value?"}
    response = await client.post(
        "/v1/search",
        json={"query": "defaults"},
        headers={**key, "Request-Timeout-Ms": header},
    )
    assert response.status_code == 200, response.text
    assert response.json()["budget"]["budget_ms"] == expected
    response = await client.post(
        "/v1/ask",
        json={**question, "budget_ms": 4000},
        headers={**key, "Request-Timeout-Ms": header},
    )
    assert response.json()["budget"]["budget_ms"] == 4000


async def test_a_failed_key_check_still_records_the_auth_stage(
    client: httpx.AsyncClient, spans: InMemorySpanExporter
) -> None:
    response = await client.post(
        "/v1/ask", json={"question": "lists"}, headers={"Authorization": "Bearer rt_nope"}
    )
    assert response.status_code == 401
    (auth,) = [s for s in spans.get_finished_spans() if s.name == "auth"]
    assert attributes(auth)["ragtime.budget.budget_ms"] == 15000
    assert not auth.status.is_ok


async def test_ten_bad_requests_do_not_fire_the_error_ratio_alert(
    client: httpx.AsyncClient, key: dict[str, str]
) -> None:
    evaluator = AlertEvaluator(for_s=0.0, window_s=300.0, clock=lambda: pytest.fail("unused"))
    await evaluator.evaluate_once(0.0)
    statuses = []
    for case in CASES[:5]:  # deep JSON, bad headers, 20 MB bodies: without a key, then with
        for auth in ({}, key):
            response, _ = await send(client, case, auth)
            statuses.append(response.status_code)
    await evaluator.evaluate_once(15.0)
    assert len(statuses) == 10 and all(400 <= s < 500 for s in statuses), statuses
    assert [a["labels"]["alertname"] for a in evaluator.firing()] == []
    await evaluator.stop()


async def test_a_route_without_a_body_settles_its_auth_stage_on_the_default_budget(
    client: httpx.AsyncClient, key: dict[str, str], spans: InMemorySpanExporter
) -> None:
    response = await client.get("/v1/alerts", headers={**key, "Request-Timeout-Ms": "x"})
    assert response.status_code == 200, response.text
    (auth,) = [s for s in spans.get_finished_spans() if s.name == "auth"]
    assert attributes(auth)["ragtime.budget.budget_ms"] == 15000
    assert auth.status.is_ok
