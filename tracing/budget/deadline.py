"""Deadline waits: streamed events are waited for only while budget remains.

Waits use ``asyncio.timeout``, never ``asyncio.wait_for``: on Python 3.11 ``wait_for`` drops a
cancellation that arrives as the awaited result does (CPython gh-86296), so a client that went
away mid-answer went on being served to the end. Blocking work waits on its stage's own
threads (``app.stages.threads``), by the same rule.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TypeVar

E = TypeVar("E")


async def next_before_deadline(
    events: AsyncIterator[E],
    deadline: float,
    *,
    reserve_ms: float = 0.0,
    stop_at: float | None = None,
) -> E | None:
    """The next event, or ``None`` when ``deadline`` (a ``time.perf_counter()`` value) less
    ``reserve_ms`` passes first, or ``stop_at`` when that is sooner."""
    until = deadline if stop_at is None else min(deadline, stop_at)
    timeout_s = until - reserve_ms / 1000.0 - time.perf_counter()
    if timeout_s <= 0:
        return None
    try:
        async with asyncio.timeout(timeout_s):
            return await anext(events)
    except TimeoutError:
        return None
