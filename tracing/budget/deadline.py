"""Deadline waits: blocking work and streamed events are waited for only while budget remains.

A worker thread cannot be killed: on timeout the request stops waiting and the thread's result
is dropped when it finishes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from tracing.budget.ledger import BudgetLedger

T = TypeVar("T")
E = TypeVar("E")


class DeadlinePassed(Exception):
    """A stage's work was still running when the request's budget ran out."""


async def run_in_thread(
    ledger: BudgetLedger,
    stage: str,
    fn: Callable[..., T],
    *args: Any,
    reserve_ms: float = 0.0,
    **kwargs: Any,
) -> T:
    """Run blocking ``fn`` in a thread, waiting no longer than the budget minus ``reserve_ms``."""
    timeout_s = max(ledger.remaining_ms - reserve_ms, 0.0) / 1000.0
    try:
        return await asyncio.wait_for(asyncio.to_thread(fn, *args, **kwargs), timeout_s)
    except TimeoutError:
        raise DeadlinePassed(f"the {stage} stage ran past the deadline") from None


async def next_before_deadline(
    events: AsyncIterator[E],
    ledger: BudgetLedger,
    *,
    reserve_ms: float = 0.0,
    stop_at: float | None = None,
) -> E | None:
    """The next event, or ``None`` when the deadline (less ``reserve_ms``) passes first, or
    ``stop_at`` (a ``time.perf_counter()`` value) when that is sooner."""
    remaining_ms = ledger.remaining_ms
    if stop_at is not None:
        remaining_ms = min(remaining_ms, (stop_at - time.perf_counter()) * 1000.0)
    timeout_s = (remaining_ms - reserve_ms) / 1000.0
    if timeout_s <= 0:
        return None
    try:
        return await asyncio.wait_for(anext(events), timeout=timeout_s)
    except TimeoutError:
        return None
