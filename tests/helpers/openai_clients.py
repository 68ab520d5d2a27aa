"""The official ``openai`` client pointed at the app: in process (``asgi_openai``: the app's
lifespan, then an ``httpx2.ASGITransport``, the HTTP library that ``openai`` is built on), or
at the app served by uvicorn (``tests.helpers.app.served``), for what only a real connection
shows (a client that goes away)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx2
import openai
from fastapi import FastAPI

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
