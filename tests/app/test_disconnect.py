"""A client that goes away mid-stream cancels its generation: the backend stops producing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import build_app
from tests.helpers.ports import free_port


@pytest.fixture
def served(seeded_data_dir: Path) -> Iterator[tuple[str, ScriptedBackend]]:
    backend = ScriptedBackend([f"word{i} " for i in range(200)], delay_s=0.02)
    port = free_port()
    config = uvicorn.Config(
        build_app(seeded_data_dir, backend=backend, max_output_tokens=200),
        host="127.0.0.1",
        port=port,
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", backend
    server.should_exit = True
    thread.join(timeout=10)


def test_disconnect_stops_the_backend(
    served: tuple[str, ScriptedBackend], auth: dict[str, str]
) -> None:
    url, backend = served
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
            if line.startswith("event: token"):
                break
    # The connection is closed here, long before the 200 deltas (4 s) are through.
    deadline = time.monotonic() + 5
    while backend.closed_streams == 0:
        assert time.monotonic() < deadline, "the backend kept streaming after the disconnect"
        time.sleep(0.02)
    produced = backend.yielded
    time.sleep(0.2)
    assert backend.yielded == produced < 50


def test_a_json_client_that_disconnects_stops_the_backend(
    served: tuple[str, ScriptedBackend], auth: dict[str, str]
) -> None:
    """Issue 13, finding 3: a non-streaming ``/v1/ask`` whose client goes away while its answer
    is generated stops the generation, as a stream does."""
    url, backend = served
    ask = {"question": "What is a list?", "stream": False}
    # The client gives up after 0.5 s of the 4 s answer.
    with httpx.Client(timeout=0.5) as client, pytest.raises(httpx.ReadTimeout):
        client.post(f"{url}/v1/ask", json=ask, headers=auth)
    assert backend.started_streams == 1
    deadline = time.monotonic() + 5
    while backend.closed_streams == 0:
        assert time.monotonic() < deadline, "the backend kept generating after the disconnect"
        time.sleep(0.02)
    produced = backend.yielded
    time.sleep(0.2)
    assert backend.yielded == produced < 50
