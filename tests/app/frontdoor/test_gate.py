"""Admission control (issue 13, finding 2): a process bounds its question requests in flight and
refuses the rest at once (503 ``overloaded``, ``Retry-After``), counted and out of the error ratio;
a generation pool bounds what may queue for it; a drained app refuses with ``shutting_down``."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from app.frontdoor.gate import Admission, Refused
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import app_state, asgi_client, build_app, running_app
from tests.helpers.raw_http import ask_scope, gate_of
from tests.helpers.stopping import stopping
from tracing import metrics
from tracing._alert_conditions import REFUSED, REQUESTS, SampleKey, Snapshot, error_ratio
from tracing.budget.cost_model import CostModel
from tracing.budget.door.book import FinishAdmission
from tracing.budget.door.ticket import Ticket
from tracing.loop_lag import LoopLag


def refused(reason: str, route: str = "/v1/ask") -> float:
    value = metrics.REGISTRY.get_sample_value(
        "ragtime_admission_refused_total", {"route": route, "reason": reason}
    )
    return value or 0.0


async def test_requests_past_the_bound_are_refused_at_once(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    backend = ScriptedBackend([f"w{i} " for i in range(40)], delay_s=0.02)
    app = build_app(seeded_data_dir, backend=backend, max_in_flight=2, max_output_tokens=40)
    before = refused("overloaded")
    async with asgi_client(app) as client:
        ask = {"question": "What is a list?", "stream": False}
        slow = [asyncio.create_task(client.post("/v1/ask", json=ask, headers=auth)) for _ in "ab"]
        while backend.started_streams < 2:  # both admitted and generating
            await asyncio.sleep(0.01)
        third = await client.post("/v1/ask", json=ask, headers=auth)
        search = await client.post("/v1/search", json={"query": "lists"}, headers=auth)
        # Two refusals (no auth, no body read, no model) that waited for no answer: both of
        # the admitted ones, 0.8 s of tokens each, are still streaming.
        answered_first = [task.done() for task in slow]
        health = await client.get("/healthz")  # not a question route: never refused
        answers = await asyncio.gather(*slow)
    assert third.status_code == search.status_code == 503
    assert third.headers["retry-after"] == "5"
    assert third.json()["error"]["type"] == "overloaded"
    assert answered_first == [False, False]
    assert backend.started_streams == 2
    assert health.status_code == 200
    assert [a.status_code for a in answers] == [200, 200]
    assert refused("overloaded") == before + 1
    assert refused("overloaded", "/v1/search") >= 1


async def test_a_place_frees_when_a_request_ends(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    app = build_app(seeded_data_dir, backend=ScriptedBackend(), max_in_flight=1)
    async with asgi_client(app) as client:
        for _ in range(3):
            ask = {"question": "What is a list?"}
            response = await client.post("/v1/ask", json=ask, headers=auth)
            assert response.status_code == 200
        admission: Admission = app.state.admission
        assert admission.in_flight == 0


def test_refusals_stay_out_of_the_error_ratio() -> None:
    """100 requests: 60 refused with 503 overloaded, 4 failed with a 5xx of their own, 36 ok. The
    ratio is the failures among the admitted: 4 / 40, not 64 / 100."""
    registry = CollectorRegistry()
    requests = Counter("ragtime_requests", "", ["route", "status"], registry=registry)
    refusals = Counter("ragtime_admission_refused", "", ["route", "reason"], registry=registry)
    before = Snapshot.take(registry, 0.0)
    requests.labels(route="/v1/ask", status="200").inc(36)
    requests.labels(route="/v1/ask", status="503").inc(60)
    requests.labels(route="/v1/ask", status="500").inc(4)
    refusals.labels(route="/v1/ask", reason="overloaded").inc(60)
    increase = Snapshot.take(registry, 60.0).increase_since(before)
    assert {name for name, _ in increase} == {REQUESTS, REFUSED}
    assert error_ratio(increase) == {(): 4 / 40}
    # Only refusals: nothing admitted, nothing failed.
    only: dict[SampleKey, float] = {
        (REQUESTS, (("route", "/v1/ask"), ("status", "503"))): 10.0,
        (REFUSED, (("reason", "overloaded"), ("route", "/v1/ask"))): 10.0,
    }
    assert error_ratio(only) == {}


def test_a_drained_app_refuses_new_questions(seeded_data_dir: Path, auth: dict[str, str]) -> None:
    before = refused("shutting_down")
    with running_app(seeded_data_dir, backend=ScriptedBackend()) as client:
        with stopping(app_state(client).shutdown):
            response = client.post("/v1/ask", json={"question": "What is a list?"}, headers=auth)
        assert client.get("/healthz").status_code == 200
    assert response.status_code == 503
    assert response.json()["error"]["type"] == "shutting_down"
    assert refused("shutting_down") == before + 1


def test_the_chat_route_refuses_in_openais_shape(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    """An OpenAI client reads the refusal as it reads any other error of the chat route."""
    with running_app(seeded_data_dir, backend=ScriptedBackend()) as client:
        chat = {"model": "ragtime", "messages": [{"role": "user", "content": "What is a list?"}]}
        with stopping(app_state(client).shutdown):
            response = client.post("/v1/chat/completions", json=chat, headers=auth)
    assert response.status_code == 503 and response.headers["Retry-After"]
    assert response.json() == {
        "error": {
            "message": "the server is shutting down; retry on another instance",
            "type": "server_error",
            "param": None,
            "code": "shutting_down",
        }
    }


def test_a_full_generation_queue_refuses_at_arrival(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    """The CPU default's case: answers queued at the one llama.cpp slot, each holding seconds of
    generation. A request that the queue leaves no room for is refused at arrival (503, before
    any embedding, search or model time), not answered 504 after waiting out its budget; the
    same request with the queue empty is served; so is one behind a single answer (which the
    plan may ask to stop early)."""
    backend = ScriptedBackend()
    with running_app(seeded_data_dir, backend=backend) as client:
        budget = app_state(client).budget
        target = backend.cost_target()
        reservations = budget.reservations
        later = time.perf_counter() + 30.0
        held = [reservations.reserve(target, later, 2000.0) for _ in range(3)]  # 6 s queued
        ask = {"question": "What is a list?", "budget_ms": 4000}
        before = refused("overloaded")
        full = client.post("/v1/ask", json=ask, headers=auth)
        assert full.status_code == 503, full.text
        assert full.json()["error"]["type"] == "overloaded"
        assert full.headers["retry-after"] == "5"
        assert refused("overloaded") == before + 1
        assert backend.started_streams == 0
        for res in held[1:]:
            res.release()
        assert client.post("/v1/ask", json=ask, headers=auth).status_code == 200
        held[0].release()
        assert client.post("/v1/ask", json=ask, headers=auth).status_code == 200


def test_a_pool_holds_at_most_its_slots_and_their_queue(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    backend = ScriptedBackend()
    with running_app(seeded_data_dir, backend=backend, max_queued_per_slot=1) as client:
        reservations = app_state(client).budget.reservations
        later = time.perf_counter() + 30.0
        held = [reservations.reserve(backend.cost_target(), later, 0.0) for _ in range(2)]
        refused_ask = client.post("/v1/ask", json={"question": "What is a list?"}, headers=auth)
        held[0].release()
        served = client.post("/v1/ask", json={"question": "What is a list?"}, headers=auth)
    assert refused_ask.status_code == 503 and "at most 2" in refused_ask.text
    assert served.status_code == 200


def test_remote_decoding_slots_widen_the_bound() -> None:
    """A GPU server that decodes 64 at once takes 64 more than the process's own bound; the
    slots count only while its servers serve (none told yet, or all down: the bound alone).
    The places taken are the book's tickets: one count of requests in flight."""
    slots = [0]
    book = FinishAdmission(cores=1, pace=CostModel().door)
    admission = Admission(2, retry_after_s=1, finish=book, remote_slots=lambda: slots[0])
    gate = gate_of(admission)

    def enter() -> Ticket | Refused:
        return gate.admit(ask_scope(), b'{"budget_ms": 600000}')

    first = [enter() for _ in range(3)]
    assert [isinstance(v, Ticket) for v in first] == [True, True, False]
    slots[0] = 64
    assert admission.bound == 66
    more = [enter() for _ in range(64)]
    assert all(isinstance(v, Ticket) for v in more)
    assert isinstance(enter(), Refused) and admission.in_flight == book.admitted == 66
    slots[0] = 0  # the servers went down: no new admissions until the 66 leave
    for ticket in more:
        assert isinstance(ticket, Ticket)
        gate.finished(ticket, learn=False)
    assert isinstance(enter(), Refused) and admission.in_flight == 2


async def test_a_burst_past_a_fixed_cap_is_admitted_when_it_fits(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    """Issue 22: 20 questions at once, each with a budget the work ahead fits in, are all
    answered; a fixed cap of 8 refused 12 of them."""
    backend = ScriptedBackend(["an ", "answer "], delay_s=0.01)
    app = build_app(seeded_data_dir, backend=backend)
    ask = {"question": "What is a list?", "budget_ms": 60_000}
    async with asgi_client(app) as client:
        answers = await asyncio.gather(
            *(client.post("/v1/ask", json=ask, headers=auth) for _ in range(20))
        )
        finish = app.state.admission.finish
        assert finish.admitted == 0  # every ticket given back
    assert [a.status_code for a in answers] == [200] * 20
    assert backend.started_streams == 20


async def test_a_request_that_cannot_finish_in_time_is_refused_by_its_own_budget(
    seeded_data_dir: Path, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three requests ahead at 400 ms each: a 1 s budget cannot finish, a 60 s one can. The
    budget is the body's; a request without a key is never read, so it counts with the default
    budget and gets its 401."""
    monkeypatch.setattr(LoopLag, "ms", lambda self, now=None: 0.0)  # arrivals stamped as they come
    app = build_app(seeded_data_dir, backend=ScriptedBackend())
    before = refused("overloaded")
    async with asgi_client(app) as client:
        finish = app.state.admission.finish
        # The figures it predicts with, fixed: 400 ms alone and per request ahead, nothing more.
        finish.generation_floor_ms, finish.lag_ms = (lambda route: 0.0), (lambda: 0.0)
        finish.cores, finish.prior_alone_ms = 1, 1.0
        now = time.perf_counter()
        ahead = [finish.issue("/v1/ask", arrived=now, budget_ms=900.0) for _ in range(3)]
        assert finish.admitted == 3
        finish.prior_alone_ms = 400.0
        ask = {"question": "What is a list?"}
        tight = await client.post("/v1/ask", json={**ask, "budget_ms": 1000}, headers=auth)
        loose = await client.post("/v1/ask", json={**ask, "budget_ms": 60_000}, headers=auth)
        no_key = await client.post("/v1/ask", json={**ask, "budget_ms": 1000})
        held = finish.admitted
        for ticket in ahead:
            ticket.finish(learn=False)
    assert tight.status_code == 503
    error = tight.json()["error"]
    assert error["type"] == "overloaded"
    assert "3 requests ahead" in error["message"]
    assert int(tight.headers["retry-after"]) >= 1
    assert loose.status_code == 200
    assert no_key.status_code == 401
    assert held == 3  # the answered request gave its ticket back
    assert refused("overloaded") == before + 1
