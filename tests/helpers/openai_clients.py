"""The official ``openai`` client pointed at the app: in process (``asgi_openai``: the app's
lifespan, then an ``httpx2.ASGITransport``, the HTTP library that ``openai`` is built on), or
at the app served by uvicorn on a free port of 127.0.0.1 (``served``), for what only a real
connection shows (a client that goes away)."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import httpx2
import openai
import uvicorn
from fastapi import FastAPI

from tests.helpers.ports import free_port

BASE = "http://ragtime"


@dataclass
class AsgiOpenAI:
    """The client (``base_url`` ``/v1``) and the raw HTTP client under it (the app's root)."""

    client: openai.AsyncOpenAI
    http: httpx2.AsyncClient


@asynccontextmanager
async def asgi_openai(app: FastAPI, api_key: str) -> AsyncIterator[AsgiOpenAI]:
    """``app`` started (its lifespan) behind an ``AsyncOpenAI`` that never retries, so that an
    error answer is seen once, as it was sent."""
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx2.AsyncClient(transport=transport, base_url=BASE) as http:
            client = openai.AsyncOpenAI(
                api_key=api_key, base_url=f"{BASE}/v1", http_client=http, max_retries=0
            )
            yield AsgiOpenAI(client, http)


@contextmanager
def served(app: FastAPI) -> Iterator[str]:
    """``app`` served by uvicorn in a thread on a free port of 127.0.0.1: its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
