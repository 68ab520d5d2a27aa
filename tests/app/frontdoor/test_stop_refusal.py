"""The stop's one refuser (issue 57 §4): once the stop has begun, every request but the probes,
on every route, over a real server (read ahead of the loop or by it) or an in-process client,
is answered by ``ShutdownMiddleware`` alone, with the same 503 ``shutting_down``: the same
headers and body everywhere, in OpenAI's shape on the chat route. The gate never refuses for
the stop."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from sse_starlette.sse import AppStatus
from starlette.types import Scope, Send

from app.frontdoor.gate import SHUTTING_DOWN, Admission, Refused, refusal
from app.frontdoor.shutdown import Shutdown, ShutdownMiddleware
from app.http.routes import chat
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import asgi_client, base_url, build_app, uvicorn_serving
from tests.helpers.raw_http import ask, connect, gate_of, read_response
from tracing import metrics
from tracing.budget.cost_model import CostModel
from tracing.budget.door.book import FinishAdmission
from tracing.budget.door.ticket import Ticket

RETRY_AFTER_S = 5

#: What is asked during the stop: questions the gate would take as they are parsed, the other
#: routes, a question without a key, and a path that is no route.
ASKED: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/ask", {"question": "What is a list?"}),
    ("POST", "/v1/search", {"query": "lists"}),
    (
        "POST",
        chat.ROUTE,
        {"model": "ragtime", "messages": [{"role": "user", "content": "What is a list?"}]},
    ),
    ("GET", chat.MODELS_ROUTE, None),
    ("GET", "/v1/collections", None),
    ("GET", "/nowhere", None),
]


@pytest.fixture
def refusers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``ShutdownMiddleware`` wrote its refusal for."""
    written: list[str] = []
    original = ShutdownMiddleware._refuse

    async def recording(self: ShutdownMiddleware, scope: Scope, send: Send) -> None:
        written.append(scope["path"])
        await original(self, scope, send)

    monkeypatch.setattr(ShutdownMiddleware, "_refuse", recording)
    return written


def refused_shutting_down() -> float:
    return sum(
        metrics.REGISTRY.get_sample_value(
            "ragtime_admission_refused_total", {"route": path, "reason": SHUTTING_DOWN}
        )
        or 0.0
        for _, path, _ in ASKED
    )


def assert_the_stops_refusal(answers: list[httpx.Response]) -> None:
    """Each answer is the stop's refusal, header for header and byte for byte: in the service's
    error shape, and in OpenAI's on the chat route."""
    refused = Refused(SHUTTING_DOWN, RETRY_AFTER_S)
    for answer in answers:
        expected = refusal(refused, openai=answer.request.url.path == chat.ROUTE, close=True)
        assert answer.status_code == 503, (answer.request.url, answer.text)
        headers = {name.decode(): value.decode() for name, value in expected.headers}
        assert {name: answer.headers.get(name) for name in headers} == headers
        assert answer.content == expected.body, answer.request.url


def the_asked(auth: dict[str, str]) -> Iterator[tuple[str, str, dict[str, Any] | None, Any]]:
    """``ASKED``, each with its headers: the key, but for the last question (none)."""
    for method, path, body in ASKED:
        yield method, path, body, auth
    yield "POST", "/v1/ask", {"question": "What is a list?"}, {}


@pytest.mark.parametrize("read_ahead", [True, False])
def test_a_real_server_refuses_every_route_from_one_place_during_the_stop(
    seeded_data_dir: Path, auth: dict[str, str], refusers: list[str], read_ahead: bool
) -> None:
    """``ragtime serve``'s way: the protocol (or the read-ahead thread) takes nothing during the
    stop, so the questions it would decide as they are parsed meet the same refuser as the
    rest; the probes are answered."""
    app = build_app(seeded_data_dir, backend=ScriptedBackend(), shutdown_grace_s=30.0)
    before = refused_shutting_down()
    try:
        with uvicorn_serving(app, read_ahead=read_ahead) as server, httpx.Client() as client:
            app.state.shutdown.begin()
            url = base_url(server)
            answers = [
                client.request(method, url + path, json=body, headers=headers, timeout=10)
                for method, path, body, headers in the_asked(auth)
            ]
            health = client.get(url + "/healthz", timeout=10)
    finally:
        AppStatus.should_exit = False
    assert_the_stops_refusal(answers)
    assert refusers == [answer.request.url.path for answer in answers]
    assert refused_shutting_down() == before + len(answers)
    assert health.status_code == 200


async def test_an_in_process_client_meets_the_same_refuser(
    seeded_data_dir: Path, auth: dict[str, str], refusers: list[str]
) -> None:
    """No protocol of ours decides here (httpx's ASGI transport): the same one refusal."""
    app = build_app(seeded_data_dir, backend=ScriptedBackend(), shutdown_grace_s=30.0)
    try:
        async with asgi_client(app) as client:
            app.state.shutdown.begin()
            answers = [
                await client.request(method, path, json=body, headers=headers)
                for method, path, body, headers in the_asked(auth)
            ]
    finally:
        AppStatus.should_exit = False
    assert_the_stops_refusal(answers)
    assert refusers == [answer.request.url.path for answer in answers]


@pytest.mark.parametrize("read_ahead", [True, False])
def test_a_question_whose_stop_began_before_its_body_came_meets_the_same_refuser(
    seeded_data_dir: Path, api_key: str, refusers: list[str], read_ahead: bool
) -> None:
    """Its head read before the stop (so the gate took it), its body after: the protocol, or
    the read-ahead thread, asks the gate again once the body is read, and leaves it to the
    app's refuser."""
    app = build_app(seeded_data_dir, backend=ScriptedBackend(), shutdown_grace_s=30.0)
    head, body = ask(api_key, 60_000)
    try:
        with (
            uvicorn_serving(app, read_ahead=read_ahead) as server,
            connect(server) as sock,
            sock.makefile("rb") as stream,
        ):
            sock.sendall(head)
            time.sleep(0.2)
            app.state.shutdown.begin()
            sock.sendall(body)
            answer = read_response(stream)
    finally:
        AppStatus.should_exit = False
    expected = refusal(Refused(SHUTTING_DOWN, RETRY_AFTER_S), close=True)
    assert answer.status == 503 and answer.body == expected.body
    assert answer.headers["connection"] == "close"
    assert refusers == ["/v1/ask"]


def test_the_gate_never_refuses_for_the_stop() -> None:
    """Asked during the stop (a request admitted as it began), the gate admits by places and
    predicted finish alone; it takes nothing as it is parsed, so the app's refuser answers."""
    admission = Admission(
        1, retry_after_s=RETRY_AFTER_S, finish=FinishAdmission(cores=1, pace=CostModel().door)
    )
    stopped = Shutdown(1.0)
    stopped.begin()
    try:
        gate = replace(gate_of(admission), shutdown=stopped)
        headers = [(b"authorization", b"Bearer rt_x"), (b"content-length", b"2")]
        scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/v1/ask"}
        scope.update(headers=headers, state={"arrived_at": time.perf_counter()})
        assert not gate.takes(scope)
        ticket = gate.admit(scope, b"{}")
        assert isinstance(ticket, Ticket)
        assert gate.admit(scope, b"{}") == Refused("overloaded", RETRY_AFTER_S)
        gate.finished(ticket, learn=False)
    finally:
        AppStatus.should_exit = False
