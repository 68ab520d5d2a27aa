"""Admission control: past the bound of requests in flight, a request is refused at once."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from app.main import create_app
from tests.fakes.backends import ScriptedBackend
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import (
    asgi_client,
    create_key,
    make_settings,
    seed_data_dir,
    services_of_doubles,
)
from tracing.metrics import REGISTRY


def refusals(route: str) -> float:
    value = REGISTRY.get_sample_value("ragtime_admission_refused_total", {"route": route})
    return value or 0.0


async def test_past_the_bound_a_request_is_refused_at_once_and_counted(
    tmp_path: Path, corpus_dir: Path
) -> None:
    settings = make_settings(tmp_path, max_in_flight=2, retry_after_s=3, max_output_tokens=100)
    seed_data_dir(settings.data_dir, corpus_dir, HashEmbedder())
    auth = {"Authorization": f"Bearer {create_key(settings.data_dir)}"}
    backend = ScriptedBackend([f"w{i} " for i in range(40)], delay_s=0.02)
    app = create_app(services=services_of_doubles(settings, backend=backend))
    question = {"question": "What is a list?"}
    before = {route: refusals(route) for route in ("/v1/ask", "/v1/search")}
    async with asgi_client(app) as client:
        busy = [
            asyncio.ensure_future(client.post("/v1/ask", json=question, headers=auth))
            for _ in range(2)
        ]
        while backend.started_streams < 2:  # both admitted and generating
            await asyncio.sleep(0.01)
        started = time.perf_counter()
        refused = await client.post("/v1/ask", json=question, headers=auth)
        refused_ms = (time.perf_counter() - started) * 1000
        searched = await client.post("/v1/search", json={"query": "lists"}, headers=auth)
        answered = await asyncio.gather(*busy)
        after = await client.post("/v1/ask", json=question, headers=auth)
    assert refused.status_code == 503 and refused.headers["retry-after"] == "3"
    assert refused.json()["error"]["type"] == "overloaded"
    assert refused_ms < 100  # no queueing: a refusal is answered at once
    assert searched.status_code == 503  # search is bounded too
    assert [r.status_code for r in answered] == [200, 200]
    assert after.status_code == 200  # the bound frees as requests end
    assert refusals("/v1/ask") == before["/v1/ask"] + 1
    assert refusals("/v1/search") == before["/v1/search"] + 1
