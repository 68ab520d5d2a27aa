"""Nothing a request does blocks the event loop.

The check finds blocking calls by what they are, not by how long a shared machine takes: each
known blocking entry point (model inference, the FAISS search and the store's reads, the key
store's lookups, prompt assembly, ``time.sleep``) is wrapped to note any call made on the event
loop's own thread, while every route a client calls runs a few times after a warm-up.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.keys.auth import KeyStore
from app.safety.moderation import Moderator
from app.stages.citations import Attributor
from inference.prompt import PromptAssembler
from retrieval.rerank.reranker import Reranker
from retrieval.store.document_store import DocumentStore
from tests.fakes.backends import ScriptedBackend
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.app import asgi_client, build_app
from tracing.budget import BudgetEngine

#: (owner, attribute) of every call known to block: none may run on the loop's thread.
BLOCKING: list[tuple[Any, str]] = [
    (HashEmbedder, "embed"),
    (Reranker, "rerank"),
    (DocumentStore, "search_with_info"),
    (DocumentStore, "get"),
    (DocumentStore, "refresh"),
    (KeyStore, "verify"),  # its try_verify answers on the loop: it never waits
    (Moderator, "scores"),
    (Attributor, "__call__"),
    (Attributor, "attribute_many"),
    (PromptAssembler, "assemble"),
    (time, "sleep"),
]
ROUNDS = 2


@contextmanager
def calls_on_the_loop(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every blocking entry point made to note the calls that run on this thread."""
    loop_thread = threading.get_ident()
    seen: list[str] = []

    def noting(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() == loop_thread:
                seen.append(name)
            return fn(*args, **kwargs)

        return wrapper

    with monkeypatch.context() as patch:
        for owner, attribute in BLOCKING:
            name = f"{getattr(owner, '__name__', owner)}.{attribute}"
            patch.setattr(owner, attribute, noting(name, getattr(owner, attribute)))
        yield seen


async def blocking_calls(
    data_dir: Path, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> list[str]:
    """The blocking calls made on the loop by every route a client calls, after a warm-up."""
    app = build_app(data_dir, backend=ScriptedBackend(), embedder=HashEmbedder(delay_s=0.001))
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

    async def run_all(client: httpx.AsyncClient) -> None:
        for method, path, body in calls:
            response = await client.request(method, path, json=body, headers=auth)
            assert response.status_code == 200, (path, response.text)

    async with asgi_client(app) as client:
        await run_all(client)  # first calls load lazily (in threads) and warm caches
        with calls_on_the_loop(monkeypatch) as seen:
            for _ in range(ROUNDS):
                await run_all(client)
    return seen


async def test_no_request_blocks_the_event_loop(
    seeded_data_dir: Path, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await blocking_calls(seeded_data_dir, auth, monkeypatch) == []


async def test_the_check_catches_a_blocking_call(
    seeded_data_dir: Path, auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def blocking_publish(self: BudgetEngine) -> None:
        time.sleep(0.001)  # what a synchronous database call on the loop would do

    monkeypatch.setattr(BudgetEngine, "publish", blocking_publish)
    assert "time.sleep" in await blocking_calls(seeded_data_dir, auth, monkeypatch)
