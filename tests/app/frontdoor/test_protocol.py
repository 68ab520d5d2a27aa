"""Admission as a request is parsed (issue 22 §1, ``app.frontdoor.protocol``): a question that
cannot finish in time is refused by the server's HTTP protocol, before any task is made for it,
and the connection goes on; what the protocol does not take, the middleware still decides; an
admitted request gives its place back however it ends.

The server is the real one (uvicorn with ``AdmittingProtocol``, as ``ragtime serve`` runs it),
spoken to over a raw socket, so that a request's headers and body can come in separate reads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from app.frontdoor.gate import (
    GATE_KEY,
    TICKET,
    Admission,
    Gate,
    Refused,
    count_refusal,
    stamp_arrival,
)
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import build_app
from tests.helpers.raw_http import (
    ask,
    ask_scope,
    connect,
    crowded_server,
    gate_of,
    read_response,
    settled,
)
from tracing import metrics
from tracing.budget.cost_model import CostModel
from tracing.budget.door.book import FinishAdmission
from tracing.budget.door.ticket import Ticket
from tracing.loop_lag import LoopLag


def sample(name: str, labels: dict[str, str] | None = None) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels or {}) or 0.0


def refusals_after_read() -> float:
    return sample("ragtime_admission_refusal_after_read_seconds_count")


def answers_503() -> float:
    return sample("ragtime_requests_total", {"route": "/v1/ask", "status": "503"})


@pytest.fixture
def middleware_refusals(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The reasons the middleware refused with (it must see none the protocol refused)."""
    seen: list[str] = []
    original = Gate.refused

    def recording(self: Gate, scope: Any, refused: Refused, *args: Any, **kwargs: Any) -> None:
        if not args and "access_logger" not in kwargs:  # the middleware's (nothing on a socket)
            seen.append(refused.reason)
        original(self, scope, refused, *args, **kwargs)

    monkeypatch.setattr(Gate, "refused", recording)
    return seen


@pytest.fixture
def crowded(
    seeded_data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[uvicorn.Server, FastAPI]]:
    """The app served for real, three requests ahead of every new one at 400 ms each: a 1 s
    budget cannot finish, a 60 s one can."""
    monkeypatch.setattr(LoopLag, "ms", lambda self, now=None: 0.0)  # arrivals stamped as they come
    with crowded_server(build_app(seeded_data_dir, backend=ScriptedBackend())) as served:
        yield served


def test_a_question_that_cannot_finish_is_refused_as_it_is_parsed(
    crowded: tuple[uvicorn.Server, FastAPI],
    api_key: str,
    middleware_refusals: list[str],
    spans: InMemorySpanExporter,
) -> None:
    server, app = crowded
    before_503, before_read = answers_503(), refusals_after_read()
    before_waits = sample("ragtime_request_socket_wait_seconds_count")
    with connect(server) as sock, sock.makefile("rb") as stream:
        head, body = ask(api_key, 1000)
        sock.sendall(head + body)
        tight = read_response(stream)
        # Its body in a later read: decided once the body is read, with the body's budget.
        sock.sendall(head)
        time.sleep(0.2)
        sock.sendall(body)
        split = read_response(stream)
        head, body = ask(api_key, 60_000)
        sock.sendall(head + body)  # the same connection, kept alive after both refusals
        loose = read_response(stream)
    assert tight.status == split.status == 503
    error = tight.json()["error"]
    assert error["type"] == "overloaded" and "3 requests ahead" in error["message"]
    assert int(tight.headers["retry-after"]) >= 1
    assert tight.headers["content-type"] == "application/json"
    assert loose.status == 200 and loose.json()["answer"]
    assert middleware_refusals == []  # never reached the app
    assert answers_503() == before_503 + 2
    assert refusals_after_read() == before_read + 2
    # Each request read had its wait in the kernel measured (Linux TCP_INFO).
    assert sample("ragtime_request_socket_wait_seconds_count") == before_waits + 3
    # The three crowding it are the only places taken: the answered one gave its ticket back.
    assert settled(app.state.admission, held=3) == 3
    refused = [
        (s.name, s.kind, dict(s.attributes or {}))
        for s in spans.get_finished_spans()
        if (s.attributes or {}).get("ragtime.admission.refused")
    ]
    assert len(refused) == 2
    for name, kind, attributes in refused:
        assert (name, kind) == ("POST /v1/ask", SpanKind.SERVER)
        assert attributes["http.status_code"] == 503
        assert "3 requests ahead" in str(attributes["ragtime.admission.detail"])


def test_one_arrival_clock_a_refusal_and_the_budget_count_from() -> None:
    """A request's budget and its refusal's time both start when its bytes reached the kernel:
    its read, less how long they waited there (``stamp_arrival``)."""
    now = time.perf_counter()
    state: dict[str, Any] = {}
    stamp_arrival(state, now, 0.25)
    assert state == {"read_at": now, "arrived_at": now - 0.25}
    before = sample("ragtime_admission_refusal_seconds_sum")
    before_read = sample("ragtime_admission_refusal_after_read_seconds_sum")
    count_refusal("/v1/ask", "overloaded", state, sent_at=now + 0.001)
    assert sample("ragtime_admission_refusal_seconds_sum") - before == pytest.approx(0.251)
    after_read = sample("ragtime_admission_refusal_after_read_seconds_sum") - before_read
    assert after_read == pytest.approx(0.001)


@pytest.mark.parametrize("read_ahead", [True, False])
def test_the_requests_trace_says_how_long_it_waited_before_its_read(
    seeded_data_dir: Path,
    api_key: str,
    spans: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    read_ahead: bool,
) -> None:
    """Read ahead of the loop or by it, the request's trace says how long its bytes waited in
    the kernel before their read: what its budget counts before its first stage."""
    monkeypatch.setattr(LoopLag, "ms", lambda self, now=None: 0.0)
    app = build_app(seeded_data_dir, backend=ScriptedBackend())
    with (
        crowded_server(app, read_ahead=read_ahead) as (server, _),
        connect(server) as sock,
        sock.makefile("rb") as stream,
    ):
        sock.sendall(b"".join(ask(api_key, 60_000)))
        answered = read_response(stream)
    assert answered.status == 200
    (root,) = [s for s in spans.get_finished_spans() if s.name == "POST /v1/ask"]
    attributes = dict(root.attributes or {})
    waited = attributes["ragtime.request.socket_wait_ms"]
    assert isinstance(waited, float) and waited >= 0.0


def test_the_door_reads_the_budget_as_the_route_does(
    crowded: tuple[uvicorn.Server, FastAPI], api_key: str, middleware_refusals: list[str]
) -> None:
    """One budget reader (``app.http.limits``): the body's ``budget_ms``, else
    ``Request-Timeout-Ms`` (clamped to the range), else the default; what the route will refuse
    counts with the default, and the route answers it. The middleware reads it the same way."""
    server, _ = crowded
    cases = [
        (None, "1000", False, 503),  # the header alone: 1 s cannot finish
        (None, "1000", True, 503),  # ... decided by the middleware (Expect: 100-continue)
        (None, "60000", False, 200),
        (60_000, "1000", False, 200),  # the body's budget first
        (None, "a second", False, 400),  # the route's 400, after the default admitted it
        (10**9, None, False, 422),  # out of range: the route's 422
    ]
    statuses = []
    for budget_ms, timeout_ms, expect, _ in cases:
        with connect(server) as sock, sock.makefile("rb") as stream:
            head, body = ask(api_key, budget_ms, timeout_ms=timeout_ms, expect_continue=expect)
            sock.sendall(head)
            if expect:
                first = read_response(stream)
                if first.status == 100:
                    sock.sendall(body)
                    first = read_response(stream)
                statuses.append(first.status)
                continue
            sock.sendall(body)
            statuses.append(read_response(stream).status)
    assert statuses == [status for *_, status in cases]
    assert middleware_refusals == ["overloaded"]


def test_what_the_protocol_does_not_decide_the_middleware_does(
    crowded: tuple[uvicorn.Server, FastAPI], api_key: str, middleware_refusals: list[str]
) -> None:
    """``Expect: 100-continue`` (its body comes only once the app reads it) and a gate turned
    off (``RAGTIME_ADMIT_AS_PARSED=false``) both leave the decision to the middleware."""
    server, app = crowded
    before_read = refusals_after_read()
    with connect(server) as sock, sock.makefile("rb") as stream:
        head, body = ask(api_key, 1000, expect_continue=True)
        sock.sendall(head)
        assert read_response(stream).status == 100  # the middleware asked for the body
        sock.sendall(body)
        waited = read_response(stream)
        state = server.lifespan.state
        state[GATE_KEY] = replace(state[GATE_KEY], decides=False)
        head, body = ask(api_key, 1000)
        sock.sendall(head + body)
        off = read_response(stream)
    assert waited.status == off.status == 503
    assert middleware_refusals == ["overloaded", "overloaded"]
    # Stamped as parsed all the same: the refusal's time from its read is counted.
    assert refusals_after_read() == before_read + 2
    assert settled(app.state.admission, held=3) == 3


def test_a_refusal_keeps_or_closes_the_connection_as_http_asks(
    seeded_data_dir: Path, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request sent in the same read right after a refused one (pipelined) is answered in
    full, though its answer outlasts the keep-alive timeout the refusal's end armed; HTTP/1.0
    is refused with ``connection: close`` and the connection closed."""
    monkeypatch.setattr(LoopLag, "ms", lambda self, now=None: 0.0)
    backend = ScriptedBackend([f"w{i} " for i in range(8)], delay_s=0.1)  # 0.8 s an answer
    app = build_app(seeded_data_dir, backend=backend)
    with crowded_server(app, timeout_keep_alive=0.3) as (server, _):
        with connect(server) as sock, sock.makefile("rb") as stream:
            sock.sendall(b"".join([*ask(api_key, 1000), *ask(api_key, 60_000)]))
            refused, answered = read_response(stream), read_response(stream)
        with connect(server) as sock, sock.makefile("rb") as stream:
            sock.sendall(b"".join(ask(api_key, 1000, http="1.0")))
            old = read_response(stream)
            closed = stream.read() == b""
    assert refused.status == 503 and answered.status == 200
    assert answered.json()["answer"].split() == [f"w{i}" for i in range(8)]
    assert old.status == 503 and old.headers["connection"] == "close" and closed


async def test_an_admitted_request_gives_its_place_back_however_it_ends() -> None:
    finish = FinishAdmission(cores=1, pace=CostModel().door)
    admission = Admission(2, retry_after_s=1, finish=finish)
    gate = gate_of(admission)
    scope = ask_scope()

    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("an outer layer failed before the route")

    ticket = gate.admit(scope, b'{"budget_ms": 5000}')
    assert isinstance(ticket, Ticket) and admission.in_flight == 1
    with pytest.raises(RuntimeError):
        await gate.admitted(broken, ticket)(scope, _gone, _discard)
    assert admission.in_flight == 0 and finish.admitted == 0
    assert scope["state"][TICKET] is ticket


async def test_a_full_process_refuses_without_reading_the_budget() -> None:
    admission = Admission(
        1, retry_after_s=7, finish=FinishAdmission(cores=1, pace=CostModel().door)
    )
    gate = gate_of(admission)
    scope = ask_scope()
    first = gate.admit(scope, b"{}")
    second = gate.admit(scope, b"not json")
    assert isinstance(first, Ticket)
    assert second == Refused("overloaded", 7)
    assert admission.in_flight == 1  # the refused one took no place


async def _gone() -> dict[str, Any]:
    return {"type": "http.disconnect"}


async def _discard(message: Any) -> None:
    return None


def test_the_chat_route_is_refused_in_openais_shape() -> None:
    admission = Admission(
        1, retry_after_s=3, finish=FinishAdmission(cores=1, pace=CostModel().door)
    )
    gate = replace(gate_of(admission), openai_routes=frozenset({"/v1/chat/completions"}))
    refused = Refused("overloaded", 3, "2 requests ahead")
    date = [(b"date", b"Sat, 05 Dec 2026 13:35:34 GMT")]
    response = gate.refusal({"path": "/v1/chat/completions"}, refused).wire(date)
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"HTTP/1.1 503 Service Unavailable" and lines[1] == b"date: " + date[0][1]
    assert b"retry-after: 3" in lines and b"connection: close" not in lines
    assert f"content-length: {len(body)}".encode() in lines
    error = json.loads(body)["error"]
    assert error["code"] == "overloaded" and error["type"] == "server_error"
    assert "2 requests ahead" in error["message"]
    plain = gate.refusal({"path": "/v1/ask"}, refused, close=True).wire([])
    head, _, body = plain.partition(b"\r\n\r\n")
    assert b"connection: close" in head.split(b"\r\n")
    assert json.loads(body)["error"]["type"] == "overloaded"
