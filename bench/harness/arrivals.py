"""When requests start: open-loop Poisson arrivals, or a closed loop of N users.

Open loop is how real users arrive: each request starts at its scheduled instant whether or not
earlier ones have finished, so a slow server meets a growing queue instead of a politely waiting
client. A closed loop of N users sends the next request only when the previous one is answered.
Both call ``dispatch(index, due)``, ``due`` being the ``time.perf_counter()`` instant the
request was meant to start.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import numpy as np

Dispatch = Callable[[int, float], Awaitable[None]]


def poisson_offsets(
    rate: float, *, count: int | None = None, duration_s: float | None = None, seed: int = 0
) -> list[float]:
    """Arrival instants (seconds from 0) of a Poisson process of ``rate`` per second.

    Exactly ``count`` arrivals, or every arrival before ``duration_s``; the same seed gives the
    same schedule.
    """
    if rate <= 0:
        raise ValueError(f"rate must be > 0, got {rate}")
    if (count is None) == (duration_s is None):
        raise ValueError("give exactly one of count and duration_s")
    rng = np.random.default_rng(seed)
    if count is not None:
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        return np.cumsum(rng.exponential(1.0 / rate, size=count)).tolist()
    assert duration_s is not None
    offsets: list[float] = []
    now = 0.0
    while True:
        # Draw in blocks (about a second of arrivals) until the horizon is passed.
        block = rng.exponential(1.0 / rate, size=max(16, int(rate)))
        for gap in block.tolist():
            now += gap
            if now >= duration_s:
                return offsets
            offsets.append(now)


async def open_loop(
    offsets: list[float], dispatch: Dispatch, *, max_in_flight: int = 2048
) -> float:
    """Start ``dispatch(i, due)`` at each offset without waiting for earlier ones; wall seconds.

    ``max_in_flight`` is a safety valve that bounds the run: at the limit, the next start waits
    for a slot (and its latency, measured from ``due``, shows the wait).
    """
    slots = asyncio.Semaphore(max_in_flight)
    tasks: set[asyncio.Task[None]] = set()
    start = time.perf_counter()

    async def run(index: int, due: float) -> None:
        try:
            await dispatch(index, due)
        finally:
            slots.release()

    for index, offset in enumerate(offsets):
        due = start + offset
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await slots.acquire()
        task = asyncio.create_task(run(index, due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    while tasks:
        await asyncio.gather(*list(tasks))
    return time.perf_counter() - start


async def closed_loop(
    users: int,
    dispatch: Dispatch,
    *,
    count: int | None = None,
    duration_s: float | None = None,
) -> float:
    """``users`` users, each sending its next request when the last is answered; wall seconds.

    Stops after ``count`` requests in all, or starts none after ``duration_s``.
    """
    if users < 1:
        raise ValueError(f"users must be >= 1, got {users}")
    if (count is None) == (duration_s is None):
        raise ValueError("give exactly one of count and duration_s")
    start = time.perf_counter()
    deadline = None if duration_s is None else start + duration_s
    next_index = 0

    async def user() -> None:
        nonlocal next_index
        while True:
            if count is not None and next_index >= count:
                return
            if deadline is not None and time.perf_counter() >= deadline:
                return
            index = next_index
            next_index += 1
            await dispatch(index, time.perf_counter())

    await asyncio.gather(*(user() for _ in range(users)))
    return time.perf_counter() - start
