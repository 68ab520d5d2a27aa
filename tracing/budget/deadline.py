"""Deadline waits: blocking work and streamed events are waited for only while budget remains.

A worker thread cannot be killed: on timeout the request stops waiting and the thread's result
is dropped when it finishes. Give each kind of work its own bounded executor
(``run_before(..., executor=...)``) so that work abandoned at a deadline holds a slot of its own
pool only, never the threads that every other stage and request share.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

T = TypeVar("T")
E = TypeVar("E")


class DeadlinePassed(Exception):
    """A stage's work was still running when the request's budget ran out."""


async def run_before(
    deadline: float,
    stage: str,
    fn: Callable[..., T],
    *args: Any,
    executor: Executor | None = None,
    **kwargs: Any,
) -> T:
    """Run blocking ``fn`` on ``executor`` (the loop's default when None), waiting no later
    than ``deadline`` (a ``time.perf_counter()`` value). The call sees the caller's context
    (its current span), as ``asyncio.to_thread`` would give it."""
    timeout_s = max(deadline - time.perf_counter(), 0.0)
    call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
    work = asyncio.get_running_loop().run_in_executor(executor, call)
    try:
        return await asyncio.wait_for(work, timeout_s)
    except TimeoutError:
        raise DeadlinePassed(f"the {stage} stage ran past the deadline") from None


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
        return await asyncio.wait_for(anext(events), timeout=timeout_s)
    except TimeoutError:
        return None
