"""Work that stops when its client goes away: an answer being collected, an upload being
ingested. The request is polled for a disconnect while the work runs; when the client has gone,
the work is cancelled (which stops a generation or kills an ingest worker) and ``ClientGone``
(499) is raised."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

from app.http.errors import ClientGone

#: How often work in progress checks that its client is still there.
DISCONNECT_POLL_S = 0.05
T = TypeVar("T")


async def while_connected(request: Request, work: Awaitable[T], *, what: str) -> T:
    """``work``'s result, unless the client goes away first: then ``work`` is cancelled and
    ``ClientGone`` says that it went away before ``what`` was ready. Cancelling this call (the
    server's shutdown cutting the request) cancels ``work`` and waits for it to end."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise ClientGone(f"the client went away before {what} was ready")
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
