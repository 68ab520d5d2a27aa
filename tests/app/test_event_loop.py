"""Nothing a request does blocks the event loop: asyncio's debug mode names any slow callback."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import httpx
import pytest

from tests.fakes.backends import ScriptedBackend
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import build_app
from tracing.budget import BudgetEngine

SLOW_CALLBACK_S = 0.02  # a callback that holds the loop this long delays every other request
ROUNDS = 3


def slow_callbacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "asyncio" and "Executing" in r.getMessage() and "took" in r.getMessage()
    ]


async def blocked_rounds(
    data_dir: Path, auth: dict[str, str], caplog: pytest.LogCaptureFixture
) -> list[list[str]]:
    """Each round's slow callbacks, for every route a client calls, after one warm-up round."""
    loop = asyncio.get_running_loop()
    # An embedder as slow as a model: embedding on the loop would be named by the check.
    embedder = HashEmbedder(delay_s=2 * SLOW_CALLBACK_S)
    app = build_app(data_dir, backend=ScriptedBackend(), embedder=embedder)
    question = {"question": "How do I give a function parameter a default value?"}
    chat = {"model": "ragtime", "messages": [{"role": "user", "content": question["question"]}]}
    calls = [
        ("POST", "/v1/ask", question),
        ("POST", "/v1/ask", {**question, "stream": True}),
        ("POST", "/v1/search", {"query": "default parameter values"}),
        ("POST", "/v1/chat/completions", chat),
        ("POST", "/v1/chat/completions", {**chat, "stream": True}),
        ("GET", "/v1/models", None),
        ("GET", "/readyz", None),
        ("GET", "/v1/budget/model", None),
        ("GET", "/metrics", None),
    ]
    rounds: list[list[str]] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ragtime") as client:

            async def run_all() -> None:
                for method, path, body in calls:
                    response = await client.request(method, path, json=body, headers=auth)
                    assert response.status_code == 200, (path, response.text)

            await run_all()  # first calls load lazily (in threads) and warm caches
            loop.set_debug(True)
            loop.slow_callback_duration = SLOW_CALLBACK_S
            try:
                with caplog.at_level(logging.WARNING, logger="asyncio"):
                    for _ in range(ROUNDS):
                        await asyncio.sleep(0)  # end this task's step: its report goes first
                        caplog.clear()
                        await run_all()
                        await asyncio.sleep(0)
                        rounds.append(slow_callbacks(caplog))
            finally:
                loop.set_debug(False)
    return rounds


async def test_no_request_blocks_the_event_loop(
    seeded_data_dir: Path, auth: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    rounds = await blocked_rounds(seeded_data_dir, auth, caplog)
    # Blocking code is slow every time; a garbage collection or a worker thread holding the
    # GIL makes one round slow once. Fail on what most rounds show.
    blocked = [r for r in rounds if r]
    assert len(blocked) <= ROUNDS // 2, "\n".join(line for r in blocked for line in r)


async def test_the_check_catches_a_blocking_call(
    seeded_data_dir: Path,
    auth: dict[str, str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def blocking_publish(self: BudgetEngine) -> None:
        time.sleep(0.05)  # what a synchronous database call on the loop would do

    monkeypatch.setattr(BudgetEngine, "publish", blocking_publish)
    rounds = await blocked_rounds(seeded_data_dir, auth, caplog)
    assert all(rounds), rounds
