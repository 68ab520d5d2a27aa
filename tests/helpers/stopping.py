"""Requests sent to a ``ragtime serve`` process while it is told to stop, and how each ended: a
stream's events, or a status and body; whether it finished or was ended by ``shutting_down``.
For the process tests of the shutdown (``test_shutdown_process``, ``test_shutdown_signals``)."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
from sse_starlette.sse import AppStatus

from app.frontdoor.shutdown import Shutdown
from tests.helpers.sse import parse_sse


@dataclass
class Outcome:
    """How one request ended: its status, its stream's events, or its body."""

    status: int = 0
    events: list[tuple[str, object]] = field(default_factory=list)
    body: dict[str, object] = field(default_factory=dict)
    first_byte: threading.Event = field(default_factory=threading.Event)
    failed: str = ""  # the client's error, if the connection broke or was refused
    thread: threading.Thread | None = None  # the thread that sent it (``started``)


def stream(
    url: str, path: str, body: dict[str, object], headers: dict[str, str], outcome: Outcome
) -> None:
    """POST ``body`` to ``url + path`` and record into ``outcome`` how it ended, streamed or
    not; a transport error (a refused or cut connection) is recorded, not raised."""
    try:
        with (
            httpx.Client(timeout=120) as client,
            client.stream("POST", url + path, json=body, headers=headers) as response,
        ):
            outcome.status = response.status_code
            if response.status_code != 200 or not body.get("stream"):
                outcome.body = json.loads(response.read())
                outcome.first_byte.set()
                return
            lines: list[str] = []
            for line in response.iter_lines():
                outcome.first_byte.set()
                if line.strip() == "data: [DONE]":  # OpenAI's end, which is not JSON
                    outcome.events += [*parse_sse([*lines, ""]), ("[DONE]", None)]
                    lines = []
                else:
                    lines.append(line)
            outcome.events += parse_sse([*lines, ""])
    except httpx.TransportError as exc:
        outcome.failed = f"{type(exc).__name__}: {exc}"
        outcome.first_byte.set()


def started(url: str, path: str, body: dict[str, object], headers: dict[str, str]) -> Outcome:
    """``stream`` in a thread of its own (``joined`` waits for it)."""
    outcome = Outcome()
    outcome.thread = threading.Thread(target=stream, args=(url, path, body, headers, outcome))
    outcome.thread.start()
    return outcome


def joined(outcomes: list[Outcome], timeout_s: float = 60.0) -> None:
    """Wait for each of ``outcomes`` sent by ``started`` to end."""
    for outcome in outcomes:
        if outcome.thread is not None:
            outcome.thread.join(timeout=timeout_s)


def ask_body(*, stream: bool = True, budget_ms: int = 60_000) -> dict[str, object]:
    return {"question": "How do I make a list?", "stream": stream, "budget_ms": budget_ms}


def chat_body(model: str, *, stream: bool = True, budget_ms: int = 60_000) -> dict[str, object]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "How do I make a list?"}],
        "stream": stream,
        "budget_ms": budget_ms,
    }


def shutting_down(outcome: Outcome) -> bool:
    """Whether the request ended with the server's ``shutting_down``, in its route's shape: a
    503, or a stream whose last event is that error."""
    if outcome.status == 503:
        error = outcome.body["error"]
        assert isinstance(error, dict)
        return "shutting_down" in (error.get("type"), error.get("code"))
    if not outcome.events:
        return False
    _, data = outcome.events[-1]
    error = data.get("error") if isinstance(data, dict) else None
    return isinstance(error, dict) and "shutting_down" in (error.get("type"), error.get("code"))


def finished(outcome: Outcome) -> bool:
    """Whether the request was answered whole: a stream to its ``done`` (or ``[DONE]``), or a
    non-streamed 200."""
    if outcome.events:
        return outcome.events[-1][0] in ("done", "[DONE]")
    return outcome.status == 200 and bool(outcome.body)


@contextlib.contextmanager
def stopping(shutdown: Shutdown) -> Iterator[None]:
    """An app in process whose stop has begun (``Shutdown.begin``), for the block; sse-starlette's
    process-wide flag, which the stop sets, is cleared after it for the tests that follow."""
    shutdown.begin()
    try:
        yield
    finally:
        AppStatus.should_exit = False
