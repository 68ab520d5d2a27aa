"""A client that goes away mid-stream cancels its generation: the backend stops producing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import build_app, served


def slow_backend() -> ScriptedBackend:
    """200 deltas, 20 ms apart: 4 s of answer."""
    return ScriptedBackend([f"word{i} " for i in range(200)], delay_s=0.02)


@pytest.fixture
def slow_app(seeded_data_dir: Path) -> Iterator[tuple[str, ScriptedBackend]]:
    """The app over a 4 s answer, served by uvicorn: its URL and its backend."""
    backend = slow_backend()
    with served(build_app(seeded_data_dir, backend=backend, max_output_tokens=200)) as url:
        yield url, backend


def leave_after(url: str, auth: dict[str, str], event: str) -> None:
    """Ask a streamed question, read up to the first ``event`` event, and go away."""
    with (
        httpx.Client(timeout=30) as client,
        client.stream(
            "POST",
            f"{url}/v1/ask",
            json={"question": "What is a list?", "stream": True},
            headers=auth,
        ) as response,
    ):
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith(f"event: {event}"):
                break


def test_a_client_gone_after_the_evidence_gives_its_reservation_back(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    """The stream begins with the passages, before generation: a client that leaves then must
    not leave its planned generation time held at the target, where later requests would plan
    around it (and, enough of them, be refused)."""
    backend = slow_backend()
    app = build_app(seeded_data_dir, backend=backend, max_output_tokens=200)
    with served(app) as url:
        leave_after(url, auth, "citations")
        reservations = app.state.budget.reservations
        deadline = time.monotonic() + 5
        while reservations.open(backend.cost_target()):
            assert time.monotonic() < deadline, "the reservation is still held"
            time.sleep(0.02)


def test_disconnect_stops_the_backend(
    slow_app: tuple[str, ScriptedBackend], auth: dict[str, str]
) -> None:
    url, backend = slow_app
    leave_after(url, auth, "token")
    # The connection is closed here, long before the 200 deltas (4 s) are through.
    deadline = time.monotonic() + 5
    while backend.closed_streams == 0:
        assert time.monotonic() < deadline, "the backend kept streaming after the disconnect"
        time.sleep(0.02)
    produced = backend.yielded
    time.sleep(0.2)
    assert backend.yielded == produced < 50


def test_a_non_streaming_client_that_goes_away_stops_the_backend(
    slow_app: tuple[str, ScriptedBackend], auth: dict[str, str]
) -> None:
    """Four abandoned JSON requests used to decode to their end, ahead of the next user."""
    url, backend = slow_app
    with httpx.Client(timeout=0.5) as client, pytest.raises(httpx.ReadTimeout):
        client.post(f"{url}/v1/ask", json={"question": "What is a list?"}, headers=auth)
    deadline = time.monotonic() + 5
    while backend.closed_streams == 0:
        assert time.monotonic() < deadline, "the backend kept decoding for a client gone"
        time.sleep(0.02)
    assert backend.yielded < 100
