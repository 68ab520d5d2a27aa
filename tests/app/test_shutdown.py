"""Graceful shutdown (issue 13, finding 7): once the server is told to stop, new questions are
refused (503 ``shutting_down``) and a live stream runs on for ``shutdown_grace_s``, then ends with
an ``error`` event that says why, never cut without one; its generation stops."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from sse_starlette.sse import AppStatus

from app.admission import Admission
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import base_url, build_app, uvicorn_serving


@pytest.fixture
def server(
    seeded_data_dir: Path,
) -> Iterator[tuple[str, uvicorn.Server, ScriptedBackend, Admission]]:
    backend = ScriptedBackend([f"word{i} " for i in range(400)], delay_s=0.02)  # 8 s
    app = build_app(seeded_data_dir, backend=backend, max_output_tokens=400, shutdown_grace_s=0.5)
    try:
        with uvicorn_serving(app) as server:
            yield base_url(server), server, backend, app.state.admission
    finally:
        AppStatus.should_exit = False  # process-wide: later servers in this process run on


def test_sigterm_ends_a_live_stream_with_an_error_event(
    server: tuple[str, uvicorn.Server, ScriptedBackend, Admission], auth: dict[str, str]
) -> None:
    url, uv, backend, admission = server
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
    assert admission.draining  # new questions get 503 shutting_down
    assert events[-1] == "error", events[-3:]
    assert "done" not in events
    assert json.loads(data[-1])["error"]["type"] == "shutting_down"
    assert 0.2 <= ended_s < 5.0  # the grace (0.5 s, less 0.25 s to send the last event), not 8 s
    assert 5 < events.count("token") < 300  # on through the grace, not to its end
    assert backend.closed_streams == 1
    produced = backend.yielded
    time.sleep(0.2)
    assert backend.yielded == produced
