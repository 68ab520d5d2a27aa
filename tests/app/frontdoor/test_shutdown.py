"""Graceful shutdown (issue 13, finding 7): once the server is told to stop, new questions are
refused (503 ``shutting_down``) and a live stream runs on for ``shutdown_grace_s``, then ends with
an ``error`` event that says why, never cut without one; its generation stops."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from sse_starlette.sse import AppStatus

from app.frontdoor.shutdown import Shutdown
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import base_url, build_app, uvicorn_serving


@pytest.fixture
def server(
    seeded_data_dir: Path,
) -> Iterator[tuple[str, uvicorn.Server, ScriptedBackend, Shutdown]]:
    backend = ScriptedBackend([f"word{i} " for i in range(400)], delay_s=0.02)  # 8 s
    app = build_app(seeded_data_dir, backend=backend, max_output_tokens=400, shutdown_grace_s=0.5)
    try:
        with uvicorn_serving(app) as server:
            yield base_url(server), server, backend, app.state.shutdown
    finally:
        AppStatus.should_exit = False  # process-wide: later servers in this process run on


def test_sigterm_ends_a_live_stream_with_an_error_event(
    server: tuple[str, uvicorn.Server, ScriptedBackend, Shutdown], auth: dict[str, str]
) -> None:
    url, uv, backend, shutdown = server
    events: list[str] = []
    data: list[str] = []
    ask = {"question": "What is a list?", "stream": True}
    with (
        httpx.Client(timeout=30) as client,
        client.stream("POST", f"{url}/v1/ask", json=ask, headers=auth) as response,
    ):
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("event:"):
                events.append(line[6:].strip())
                if events == ["citations", "token"]:
                    uv.handle_exit(signal.SIGTERM, None)  # as the signal handler does
                    stopped = time.monotonic()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        ended_s = time.monotonic() - stopped
    assert shutdown.begun  # new requests get 503 shutting_down
    assert events[-1] == "error", events[-3:]
    assert "done" not in events
    assert json.loads(data[-1])["error"]["type"] == "shutting_down"
    assert 0.2 <= ended_s < 5.0  # the grace (0.5 s, less 0.25 s to send the last event), not 8 s
    assert 5 < events.count("token") < 300  # on through the grace, not to its end
    assert backend.closed_streams == 1
    produced = backend.yielded
    time.sleep(0.2)
    assert backend.yielded == produced


@pytest.fixture
def slow_server(
    seeded_data_dir: Path,
) -> Iterator[tuple[str, uvicorn.Server, ScriptedBackend, Shutdown]]:
    """A server whose first token takes 30 s, with a grace of a minute (the test ends it)."""
    backend = ScriptedBackend(["slow ", "answer "], delay_s=30.0)
    app = build_app(
        seeded_data_dir, backend=backend, shutdown_grace_s=60.0, budget_ms_default=60_000
    )
    try:
        with uvicorn_serving(app) as server:
            yield base_url(server), server, backend, app.state.shutdown
    finally:
        AppStatus.should_exit = False


def test_requests_not_yet_answered_at_the_grace_end_get_a_503(
    slow_server: tuple[str, uvicorn.Server, ScriptedBackend, Shutdown],
    auth: dict[str, str],
) -> None:
    """A question waiting for its first token when the grace ends is cancelled (its generation
    too) and answered 503 ``shutting_down``: in the service's shape on /v1/ask, in OpenAI's on
    /v1/chat/completions (a stream not yet begun). What arrives during the grace gets the same
    503 with ``Retry-After``; /healthz stays up and /readyz says not ready. The server closes
    once nothing is in flight, not after the 30 s the answers would have taken. (The grace is
    ended by the test, once it has looked, as a grace's end or a stop-now ends it.)"""
    url, uv, backend, shutdown = slow_server
    answers: dict[str, httpx.Response] = {}
    chat = {
        "model": backend.model,
        "messages": [{"role": "user", "content": "What is a list?"}],
        "stream": True,
    }

    def post(name: str, path: str, body: dict[str, object]) -> None:
        answers[name] = httpx.post(url + path, json=body, headers=auth, timeout=30)

    senders = [
        threading.Thread(target=post, args=("ask", "/v1/ask", {"question": "What is a list?"})),
        threading.Thread(target=post, args=("chat", "/v1/chat/completions", chat)),
    ]
    for sender in senders:
        sender.start()
    deadline = time.monotonic() + 10
    while backend.started_streams < 2:
        assert time.monotonic() < deadline, "the answers did not begin"
        time.sleep(0.02)
    uv.handle_exit(signal.SIGTERM, None)

    late = httpx.post(url + "/v1/search", json={"query": "list"}, headers=auth, timeout=5)
    assert late.status_code == 503, late.text
    assert late.json()["error"]["type"] == "shutting_down"
    assert int(late.headers["retry-after"]) >= 1
    assert httpx.get(url + "/healthz", timeout=5).status_code == 200
    ready = httpx.get(url + "/readyz", timeout=5)
    assert ready.status_code == 503 and ready.json()["ready"] is False
    shutdown.end_grace_now()
    ended = time.monotonic()

    for sender in senders:
        sender.join(timeout=10)
    assert answers["ask"].status_code == 503
    assert answers["ask"].json()["error"]["type"] == "shutting_down"
    assert answers["chat"].status_code == 503
    assert answers["chat"].json()["error"]["code"] == "shutting_down"  # OpenAI's shape
    assert answers["ask"].headers["retry-after"]
    assert backend.closed_streams == 2 and backend.yielded == 0  # their generation cancelled
    assert shutdown.done()  # the server may close: nothing is in flight
    assert time.monotonic() - ended < 20.0  # at the grace's end, not after the answers' 30 s


def test_a_server_with_nothing_in_flight_stops_at_once(seeded_data_dir: Path) -> None:
    app = build_app(seeded_data_dir, backend=ScriptedBackend(), shutdown_grace_s=30.0)
    try:
        with uvicorn_serving(app) as server:
            server.handle_exit(signal.SIGTERM, None)
            stopped = time.monotonic()
            deadline = stopped + 10
            while not app.state.shutdown.done():
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert time.monotonic() - stopped < 5.0  # not the 30 s grace: nothing to wait for
    finally:
        AppStatus.should_exit = False


async def test_until_grace_ends_cuts_a_wait_begun_before_the_stop() -> None:
    """A wait that began before the stop is cut at the grace's end, less the margin, in its
    own task; one that ends in time is not; before any stop, nothing expires."""
    import asyncio

    shutdown = Shutdown(grace_s=0.3)
    shutdown.bind(asyncio.get_running_loop())
    try:
        async with shutdown.until_grace_ends(0.1) as quick:
            await asyncio.sleep(0.05)
        assert not quick.expired()

        cancelled = asyncio.Event()

        async def waits_long() -> None:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        asyncio.get_running_loop().call_later(0.05, shutdown.begin)
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            async with shutdown.until_grace_ends(0.1) as grace:
                await waits_long()
        assert grace.expired() and cancelled.is_set()
        assert 0.2 <= time.monotonic() - started < 5.0  # 0.05 + 0.3 - 0.1, not 30 s
        with pytest.raises(TimeoutError):  # begun: what is left of the grace, at once set
            async with shutdown.until_grace_ends(0.1):
                await asyncio.sleep(30)
    finally:
        AppStatus.should_exit = False


async def test_ending_the_grace_now_cuts_what_waits_for_it() -> None:
    """Stop now (``end_grace_now``, a second SIGINT or a SIGQUIT): a wait set to a long grace
    is cut at once, in its own task, and the grace's end is now; again, nothing moves."""
    import asyncio

    shutdown = Shutdown(grace_s=60.0)
    shutdown.bind(asyncio.get_running_loop())
    try:
        shutdown.begin()
        assert shutdown.grace_moved.is_set()
        shutdown.grace_moved.clear()
        asyncio.get_running_loop().call_later(0.05, shutdown.end_grace_now)
        with pytest.raises(TimeoutError):
            async with shutdown.until_grace_ends(0.25) as grace:
                await asyncio.sleep(60)  # cut long before: the test would time out otherwise
        assert grace.expired()
        assert shutdown.grace_moved.is_set()  # the watchdog's wait woke
        ended = shutdown.grace_ends_at
        assert ended <= time.monotonic()
        shutdown.end_grace_now()
        assert shutdown.grace_ends_at == ended
    finally:
        AppStatus.should_exit = False


def test_a_repeated_sigterm_leaves_the_grace_and_a_sigquit_ends_it(seeded_data_dir: Path) -> None:
    """The server's handling of each signal, in process: SIGTERM begins the stop and a second
    one changes nothing (issue 41: make and the process group each send one); SIGQUIT then
    ends the grace now; uvicorn's own exit is never asked for."""
    app = build_app(seeded_data_dir, backend=ScriptedBackend(), shutdown_grace_s=60.0)
    try:
        with uvicorn_serving(app) as server:
            shutdown = app.state.shutdown
            server.handle_exit(signal.SIGTERM, None)
            ends_at = shutdown.grace_ends_at
            server.handle_exit(signal.SIGTERM, None)
            assert shutdown.grace_ends_at == ends_at > time.monotonic() + 30
            assert not server.should_exit and not server.force_exit
            server.handle_exit(signal.SIGQUIT, None)
            assert shutdown.grace_ends_at <= time.monotonic()
            assert not server.should_exit and not server.force_exit
            deadline = time.monotonic() + 30
            while not shutdown.done():  # nothing in flight: the server may close
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        AppStatus.should_exit = False
