"""Deadline waits keep a cancellation that arrives as the awaited event does.

On Python 3.11 ``asyncio.wait_for`` returned the result and dropped the cancel (CPython
gh-86296): a client that went away while a token arrived was served its whole answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tracing.budget import next_before_deadline


async def test_a_cancel_that_meets_the_next_event_is_kept() -> None:
    arrived = asyncio.Event()

    async def events() -> AsyncIterator[int]:
        await arrived.wait()
        yield 1

    waiting = asyncio.create_task(next_before_deadline(events(), time.perf_counter() + 10))
    await asyncio.sleep(0)  # waiting for the event
    arrived.set()  # the event and the cancel come in the same turn of the loop
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


async def test_the_deadline_still_ends_the_wait() -> None:
    async def never() -> AsyncIterator[int]:
        await asyncio.Event().wait()
        yield 1

    assert await next_before_deadline(never(), time.perf_counter() + 0.05) is None
    assert await next_before_deadline(never(), time.perf_counter() - 1) is None
