"""Requests read ahead of the event loop (issue 22 §1, ``app.frontdoor.read_ahead``): a question
that cannot finish in time is refused by the reading thread while the event loop is busy; what it
admits or does not decide reaches the loop's protocol whole, and is served as if the loop had
read it; a connection the loop never takes gives its place back.

The server is the real one (``GracefulServer`` with its read-ahead thread, as ``ragtime serve``
runs it), spoken to over a raw socket. "The loop is busy" is made exact: a callback on the
server's loop blocks it until the test lets go.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI

from app.frontdoor.gate import Admission
from app.frontdoor.read_ahead import connections, held_sockets
from app.frontdoor.read_ahead import reader as read_ahead_module
from app.frontdoor.read_ahead.reader import ReadAhead
from app.frontdoor.server import GracefulServer
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import build_app
from tests.helpers.raw_http import (
    ask,
    connect,
    crowded_server,
    gate_of,
    in_flight_once,
    read_response,
    settled,
)
from tracing import metrics
from tracing.budget.cost_model import CostModel
from tracing.budget.door.book import FinishAdmission
from tracing.loop_lag import LoopLag


def read_ahead(outcome: str) -> float:
    sample = metrics.REGISTRY.get_sample_value(
        "ragtime_read_ahead_requests_total", {"outcome": outcome}
    )
    return sample or 0.0


@pytest.fixture
def crowded(
    seeded_data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[uvicorn.Server, FastAPI]]:
    monkeypatch.setattr(LoopLag, "ms", lambda self, now=None: 0.0)
    app = build_app(seeded_data_dir, backend=ScriptedBackend())
    with crowded_server(app, timeout_keep_alive=1) as served:
        yield served


@contextmanager
def loop_blocked(server: uvicorn.Server) -> Iterator[None]:
    """The server's event loop held in one callback until the block ends."""
    assert isinstance(server, GracefulServer)
    reader = server.reader
    assert reader is not None
    held, release = threading.Event(), threading.Event()

    def block() -> None:
        held.set()
        release.wait(30)

    reader.loop.call_soon_threadsafe(block)
    assert held.wait(10)
    try:
        yield
    finally:
        release.set()


def test_a_question_is_refused_while_the_loop_is_busy(
    crowded: tuple[uvicorn.Server, FastAPI], api_key: str
) -> None:
    server, app = crowded
    refused_before, admitted_before = read_ahead("refused"), read_ahead("admitted")
    with connect(server) as sock, sock.makefile("rb") as stream:
        with loop_blocked(server):
            sock.sendall(b"".join(ask(api_key, 1000)))
            tight = read_response(stream)  # while the loop cannot run a thing
            sock.sendall(b"".join(ask(api_key, 60_000)))  # kept alive: the next request
        loose = read_response(stream)
    assert tight.status == 503 and "3 requests ahead" in tight.json()["error"]["message"]
    assert int(tight.headers["retry-after"]) >= 1 and "date" in tight.headers
    assert loose.status == 200 and loose.json()["answer"]
    assert read_ahead("refused") == refused_before + 1
    assert read_ahead("admitted") == admitted_before + 1
    # The three crowding it are the only places taken: the answered one gave its ticket back.
    assert settled(app.state.admission, held=3) == 3


def test_what_the_thread_does_not_decide_reaches_the_loop_whole(
    crowded: tuple[uvicorn.Server, FastAPI], api_key: str
) -> None:
    """A probe, a question without a key, two requests pipelined in one write, a request that
    cannot be parsed: each is answered by the loop's protocol and app as read."""
    server, _ = crowded
    passed_before = read_ahead("passed")
    probe = b"GET /healthz HTTP/1.1\r\nhost: ragtime\r\n\r\n"
    head, body = ask(api_key, 60_000)
    keyless = head.replace(f"authorization: Bearer {api_key}\r\n".encode(), b"") + body
    with connect(server) as sock, sock.makefile("rb") as stream:
        sock.sendall(probe)
        alive = read_response(stream)
        sock.sendall(keyless)
        unauthorized = read_response(stream)
    with connect(server) as sock, sock.makefile("rb") as stream:
        sock.sendall(probe + probe)
        pipelined = [read_response(stream), read_response(stream)]
    with connect(server) as sock, sock.makefile("rb") as stream:
        sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        garbled = read_response(stream)
    assert alive.status == 200 and unauthorized.status == 401
    assert [r.status for r in pipelined] == [200, 200]
    assert garbled.status == 400
    assert read_ahead("passed") == passed_before + 3  # after a response, the loop reads on


def test_a_refused_connection_left_idle_is_closed_after_its_keep_alive(
    crowded: tuple[uvicorn.Server, FastAPI], api_key: str
) -> None:
    server, _ = crowded
    with connect(server) as sock, sock.makefile("rb") as stream:
        sock.sendall(b"".join(ask(api_key, 1000)))
        assert read_response(stream).status == 503
        assert stream.read() == b""  # closed by the server (keep-alive 1 s), not by a timeout


@contextmanager
def standalone_reader() -> Iterator[tuple[ReadAhead, Admission, asyncio.AbstractEventLoop]]:
    """A reader on a listener of its own, deciding for a fresh admission, handing over to a
    loop that runs only when the test runs it."""
    admission = Admission(
        4, retry_after_s=1, finish=FinishAdmission(cores=1, pace=CostModel().door)
    )
    loop = asyncio.new_event_loop()
    reader = ReadAhead(
        socket.create_server(("127.0.0.1", 0)),
        gate=gate_of(admission),
        loop=loop,
        protocol=asyncio.Protocol,
        default_headers=list,
        keep_alive_s=5.0,
    )
    reader.start()
    try:
        yield reader, admission, loop
    finally:
        reader.stop()
        loop.close()


def admitted(admission: Admission) -> int:
    """Admission's count in flight, once the reader has admitted one (or after 10 s)."""
    return in_flight_once(admission, bool)


def test_a_connection_admitted_but_never_served_gives_its_place_back(api_key: str) -> None:
    """The thread admits a request and hands it to a loop that, by the time it runs, is
    stopping: the connection is closed and its place and ticket given back."""
    with standalone_reader() as (reader, admission, loop):
        with socket.create_connection(reader.listener.getsockname(), timeout=10) as sock:
            sock.sendall(b"".join(ask(api_key, 60_000)))
            book = admission.finish
            assert admitted(admission) == 1 and book is not None
            # Its place is taken before its ticket is written: admitted, not yet served.
            assert in_flight_once(admission, lambda _: book.admitted == 1) == 1
            reader.stop()
            loop.run_until_complete(asyncio.sleep(0.05))  # the hand-over runs: too late
            assert sock.recv(1) == b""
        assert admission.in_flight == 0 and book.admitted == 0


def test_a_connection_the_loop_cannot_take_gives_its_place_back(
    api_key: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The loop fails to take an admitted connection: it is logged, the connection closed,
    and its place and ticket given back."""
    with standalone_reader() as (reader, admission, loop):

        async def failing(*args: object, **kwargs: object) -> None:
            raise OSError("no room")

        monkeypatch.setattr(loop, "connect_accepted_socket", failing)
        with socket.create_connection(reader.listener.getsockname(), timeout=10) as sock:
            sock.sendall(b"".join(ask(api_key, 60_000)))
            assert admitted(admission) == 1
            deadline = time.monotonic() + 10
            while admission.in_flight and time.monotonic() < deadline:
                loop.run_until_complete(asyncio.sleep(0.01))  # the hand-over runs, and fails
            assert sock.recv(1) == b""
        assert admission.in_flight == 0 and admission.finish is not None
        assert admission.finish.admitted == 0
    assert "a connection could not be handed to the loop" in caplog.text


def test_a_handed_over_request_is_timed_from_the_threads_read(
    crowded: tuple[uvicorn.Server, FastAPI], api_key: str
) -> None:
    """A question admitted by the thread while the loop is busy counts its wait for the loop in
    its budget: its budget's clock starts at the thread's read, not at the loop's."""
    server, _ = crowded
    admitted_before = read_ahead("admitted")
    with connect(server) as sock, sock.makefile("rb") as stream:
        with loop_blocked(server):
            sock.sendall(b"".join(ask(api_key, 60_000)))
            deadline = time.monotonic() + 30
            while read_ahead("admitted") == admitted_before:  # however long the thread takes
                assert time.monotonic() < deadline, "the thread never admitted the question"
                time.sleep(0.01)
            time.sleep(0.3)  # read and admitted; the loop runs nothing meanwhile
        answered = read_response(stream)
    assert answered.status == 200
    assert answered.json()["budget"]["spent_ms"] >= 300.0


def test_a_request_is_timed_from_its_arrival_not_from_the_threads_read(
    crowded: tuple[uvicorn.Server, FastAPI], api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request that waited in the kernel before the thread read it counts that wait in its
    budget, from the kernel's stamp of its arrival: the jiffy figure (``TCP_INFO``) is taken
    away here, so only the stamp can give it."""
    server, _ = crowded
    accept = held_sockets.accept
    late = threading.Event()

    def accept_late(listener: socket.socket) -> held_sockets.HeldSocket | None:
        if not late.is_set():
            late.set()
            time.sleep(0.3)  # the request waits in the kernel meanwhile
        return accept(listener)

    monkeypatch.setattr(connections.socket_wait, "last_data_ms", lambda sock: None)
    monkeypatch.setattr(held_sockets, "accept", accept_late)
    with connect(server) as sock, sock.makefile("rb") as stream:
        sock.sendall(b"".join(ask(api_key, 60_000)))
        answered = read_response(stream)
    assert late.is_set()
    assert answered.status == 200
    assert answered.json()["budget"]["spent_ms"] >= 300.0


@pytest.fixture
def held_waits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The timeouts of the thread's waits that keep the interpreter's lock, as it makes them.
    A turn's own bound (``TURN_S``) is lifted: on a busy machine the thread may be off its core
    for that long before its first look, and these tests are about what it looks for."""
    monkeypatch.setattr(read_ahead_module, "TURN_S", 60.0)
    timeouts: list[int] = []
    wait_held = held_sockets.Poller.wait_held

    def recording(self: held_sockets.Poller, timeout_ms: int) -> list[int]:
        timeouts.append(timeout_ms)
        return wait_held(self, timeout_ms)

    monkeypatch.setattr(held_sockets.Poller, "wait_held", recording)
    return timeouts


def test_a_head_without_its_body_is_waited_for_briefly_then_let_be(
    crowded: tuple[uvicorn.Server, FastAPI], api_key: str, held_waits: list[int]
) -> None:
    """The thread waits for a head's body keeping the lock, ``BODY_WAIT_S`` at most, in the turn
    that read the head; a body that comes later is read at a later wake-up, and decided then."""
    server, _ = crowded
    head, body = ask(api_key, 1000)
    with connect(server) as sock, sock.makefile("rb") as stream, loop_blocked(server):
        sock.sendall(head)
        time.sleep(0.2)  # the head's turn ends without its body
        waits_for_body = [t for t in held_waits if t > 0]
        sock.sendall(body)
        refused = read_response(stream)  # while the loop cannot run a thing
    assert refused.status == 503
    assert 1 <= len(waits_for_body) <= read_ahead_module.BODY_WAIT_S * 1000 + 1


def test_a_request_read_whole_is_decided_without_waiting(
    crowded: tuple[uvicorn.Server, FastAPI], api_key: str, held_waits: list[int]
) -> None:
    server, _ = crowded
    with connect(server) as sock, sock.makefile("rb") as stream, loop_blocked(server):
        sock.sendall(b"".join(ask(api_key, 1000)))
        refused = read_response(stream)
    assert refused.status == 503
    assert held_waits and all(t == 0 for t in held_waits)  # only a look at what was ready


def test_a_stamp_ahead_of_the_clock_is_not_believed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wall clock stepped back after the kernel stamped the bytes: the jiffy figure."""
    monkeypatch.setattr(connections.socket_wait, "last_data_ms", lambda sock: 8.0)
    now = time.time_ns()
    held = held_sockets.HeldSocket(-1)
    assert connections.waited_ms(held, now - 30_000_000) >= 30.0
    assert connections.waited_ms(held, now + 10**12) == 8.0
    assert connections.waited_ms(held, None) == 8.0


def test_a_turn_that_fails_leaves_the_thread_reading(
    api_key: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The thread is the process's only listener: a fault in one of its turns is logged, and
    the connection it was taking is taken on the next."""
    accept, failures = ReadAhead._accept, [RuntimeError("a fault")]

    def failing_once(self: ReadAhead) -> None:
        if failures:
            raise failures.pop()
        accept(self)

    monkeypatch.setattr(ReadAhead, "_accept", failing_once)
    with standalone_reader() as (reader, admission, _):
        address = reader.listener.getsockname()
        with socket.create_connection(address, timeout=10) as sock:
            sock.sendall(b"".join(ask(api_key, 60_000)))
            assert admitted(admission) == 1
    assert not failures and "read-ahead: a turn failed" in caplog.text


def test_a_request_waiting_to_send_its_body_goes_to_the_loop_with_its_head(
    crowded: tuple[uvicorn.Server, FastAPI], api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Expect: 100-continue``: the client sends its body only once asked, so the thread hands
    the request over as soon as its head is read, not when a partial request's time is up."""
    monkeypatch.setattr(read_ahead_module, "PARTIAL_S", 3600.0)
    server, _ = crowded
    with connect(server) as sock, sock.makefile("rb") as stream:
        head, body = ask(api_key, 1000, expect_continue=True)
        sock.sendall(head)
        assert read_response(stream).status == 100  # asked for by the loop's app
        sock.sendall(body)
        assert read_response(stream).status == 503  # decided by the middleware


def test_requests_arriving_together_are_refused_and_each_counted(
    crowded: tuple[uvicorn.Server, FastAPI], api_key: str
) -> None:
    """Refusals ready together are sent in one turn, and logged and counted after it: each is
    counted once, timed from its arrival to when it was sent."""
    server, _ = crowded
    refused_before = read_ahead("refused")
    timed_before = (
        metrics.REGISTRY.get_sample_value("ragtime_admission_refusal_seconds_count") or 0.0
    )
    socks = [connect(server) for _ in range(6)]
    try:
        with loop_blocked(server):
            for sock in socks:
                sock.sendall(b"".join(ask(api_key, 1000)))
            statuses = []
            for sock in socks:
                with sock.makefile("rb") as stream:
                    statuses.append(read_response(stream).status)
    finally:
        for sock in socks:
            sock.close()
    assert statuses == [503] * 6
    assert read_ahead("refused") == refused_before + 6
    timed = metrics.REGISTRY.get_sample_value("ragtime_admission_refusal_seconds_count")
    assert timed == timed_before + 6


def test_without_the_platforms_calls_the_loop_reads(
    seeded_data_dir: Path, monkeypatch: pytest.MonkeyPatch, api_key: str
) -> None:
    """Where the calls that keep the interpreter's lock are missing (not Linux), the loop
    reads every connection, as uvicorn would, and its protocol decides."""
    monkeypatch.setattr(held_sockets, "available", lambda: False)
    app = build_app(seeded_data_dir, backend=ScriptedBackend())
    with crowded_server(app) as (server, _):
        assert isinstance(server, GracefulServer) and server.reader is None
        with connect(server) as sock, sock.makefile("rb") as stream:
            sock.sendall(b"".join(ask(api_key, 1000)))
            assert read_response(stream).status == 503
