"""Speaking HTTP/1.1 to the real server over a raw socket (a request's head and body can be
sent apart, pipelined or half-sent), a server crowded so that a tight budget is refused, and the
admission a test watches: its gate, and its count in flight once it settles."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

import uvicorn
from fastapi import FastAPI

from app.frontdoor.gate import Admission, Gate, stamp_arrival
from app.frontdoor.shutdown import Shutdown
from app.http.limits import door_budget
from app.settings import Settings
from tests.helpers.app import uvicorn_serving


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def ask(
    api_key: str,
    budget_ms: int | None,
    *,
    expect_continue: bool = False,
    http: str = "1.1",
    timeout_ms: str | None = None,
) -> tuple[bytes, bytes]:
    """A non-streamed ``/v1/ask``: its head and its body, apart (``budget_ms`` ``None``: none
    in the body; ``timeout_ms``: a ``Request-Timeout-Ms`` header)."""
    asked: dict[str, object] = {"question": "What is a list?"}
    if budget_ms is not None:
        asked["budget_ms"] = budget_ms
    body = json.dumps(asked).encode()
    head = (
        f"POST /v1/ask HTTP/{http}\r\nhost: ragtime\r\n"
        f"authorization: Bearer {api_key}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        + ("expect: 100-continue\r\n" if expect_continue else "")
        + ("" if timeout_ms is None else f"request-timeout-ms: {timeout_ms}\r\n")
        + "\r\n"
    ).encode()
    return head, body


def read_response(stream: BinaryIO) -> Response:
    """One response with a Content-Length body (or none: a 100 Continue)."""
    status = int(stream.readline().split()[1])
    headers = {}
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        headers[name.strip().lower()] = value.strip()
    body = stream.read(int(headers.get("content-length", "0")))
    return Response(status, headers, body)


@contextmanager
def crowded_server(app: FastAPI, **options: Any) -> Iterator[tuple[uvicorn.Server, FastAPI]]:
    """``app`` served for real with three requests ahead of every new one at 400 ms each: a 1 s
    budget cannot finish, a 60 s one can."""
    with uvicorn_serving(app, **options) as server:
        finish = app.state.admission.finish
        finish.generation_floor_ms, finish.lag_ms = (lambda route: 0.0), (lambda: 0.0)
        finish.cores, finish.prior_alone_ms = 1, 1.0
        now = time.perf_counter()
        ahead = [finish.issue("/v1/ask", arrived=now, budget_ms=900.0) for _ in range(3)]
        finish.prior_alone_ms = 400.0
        try:
            yield server, app
        finally:
            for ticket in ahead:
                ticket.finish(learn=False)


def connect(server: uvicorn.Server) -> socket.socket:
    return socket.create_connection((server.config.host, server.config.port), timeout=30)


def in_flight_once(admission: Admission, reached: Callable[[int], bool]) -> int:
    """Admission's count in flight once ``reached`` holds of it (or after 10 s): places are
    taken and given back by other threads and tasks than the test's."""
    deadline = time.monotonic() + 10
    while not reached(admission.in_flight) and time.monotonic() < deadline:
        time.sleep(0.01)
    return admission.in_flight


def settled(admission: Admission, *, held: int = 0) -> int:
    """Admission's count in flight (its book's tickets), once the last response's task has
    ended and only the ``held`` tickets the test took itself are left."""
    return in_flight_once(admission, lambda count: count == held)


def gate_of(admission: Admission) -> Gate:
    """A gate deciding ``/v1/ask`` with ``admission``, no stop begun, no loop lag."""
    return Gate(
        admission,
        routes=frozenset({"/v1/ask"}),
        openai_routes=frozenset(),
        shutdown=Shutdown(1.0),
        budget_ms=lambda body, header: door_budget(body, header, Settings()),
        lag_ms=lambda: 0.0,
    )


def ask_scope() -> dict[str, Any]:
    """A ``POST /v1/ask`` as the gate reads it, its arrival stamped now, as the serve path
    stamps a request it reads."""
    state: dict[str, Any] = {}
    stamp_arrival(state, time.perf_counter(), 0.0)
    return {"type": "http", "method": "POST", "path": "/v1/ask", "state": state}
