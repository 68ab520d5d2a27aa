"""The arrival clock's one fallback (issue 57 §4, ``app.frontdoor.gate``): the serve path stamps
a request as it is read; a request no protocol of ours read is stamped once, by the app's
outermost layer (``ArrivalMiddleware``), less the loop's lag; nothing else stamps, and every
reader reads the stamp as it is."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from app.frontdoor.gate import stamp_arrival
from app.frontdoor.middleware import ArrivalMiddleware

ROOT = Path(__file__).resolve().parents[3]

#: A write of the stamp, or a read of it that allows for its absence.
STAMP_WRITTEN = re.compile(r"""\[["']arrived_at["']\]\s*=(?!=)""")
STAMP_DOUBTED = re.compile(
    r"""["']arrived_at["']\s+(not\s+)?in\b|\.get\(\s*["']arrived_at|getattr\([^)]*["']arrived_at"""
)


async def stamps_seen(scope: dict[str, Any], lag_ms: float) -> dict[str, Any]:
    """The request's state as the app behind ``ArrivalMiddleware`` sees it."""
    seen: list[dict[str, Any]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(dict(scope["state"]))

    async def receive() -> Message:
        return {"type": "http.request", "body": b""}

    async def send(message: Message) -> None:
        pass

    await ArrivalMiddleware(app, lag_ms=lambda: lag_ms)(scope, receive, send)
    return seen[0]


async def test_a_request_no_protocol_of_ours_read_counts_from_the_door_less_the_lag() -> None:
    before = time.perf_counter()
    state = await stamps_seen({"type": "http", "path": "/v1/ask"}, lag_ms=250.0)
    after = time.perf_counter()
    assert before - 0.25 <= state["arrived_at"] <= after - 0.25
    assert "read_at" not in state  # no read was timed: no socket wait to tell


async def test_a_stamp_from_the_serve_path_is_left_as_it_is() -> None:
    read: dict[str, Any] = {}
    stamp_arrival(read, time.perf_counter(), 0.04)
    state = await stamps_seen({"type": "http", "path": "/v1/ask", "state": dict(read)}, 250.0)
    assert state == read


def test_the_stamp_is_written_in_two_places_and_read_without_a_fallback() -> None:
    """The serve path's ``stamp_arrival`` and the fallback of ``ArrivalMiddleware`` write it;
    only that fallback asks whether it is there."""
    written, doubted = [], []
    for package in ("app", "tracing", "bench", "retrieval", "inference"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for line in path.read_text().splitlines():
                if STAMP_WRITTEN.search(line):
                    written.append(relative)
                if STAMP_DOUBTED.search(line):
                    doubted.append(relative)
    assert written == ["app/frontdoor/gate.py", "app/frontdoor/middleware.py"]
    assert doubted == ["app/frontdoor/middleware.py"]


def test_the_check_sees_each_kind_of_fallback() -> None:
    fallbacks = [
        'arrived = getattr(state, "arrived_at", None) or time.perf_counter()',
        "if 'arrived_at' not in state:",
        'if "arrived_at" in state:',
        'arrived = state.get("arrived_at", now)',
    ]
    assert all(STAMP_DOUBTED.search(line) for line in fallbacks)
    assert STAMP_WRITTEN.search('state["arrived_at"] = started - lag')
    assert not STAMP_WRITTEN.search('state["arrived_at"] == 0.0')
