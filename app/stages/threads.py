"""Each stage's own bounded pool of worker threads, waited for no later than a deadline.

Blocking work (torch, FAISS, SQLite, a classifier) never runs on the event loop. A thread cannot
be killed: work abandoned at a deadline keeps its thread until it finishes. With a pool per stage
it holds a slot of that stage's pool only, so a slow reranker cannot starve embedding or search.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from tracing.budget import run_before

T = TypeVar("T")


class StageThreads:
    """``workers`` threads for one stage; ``run`` raises ``DeadlinePassed`` at the deadline."""

    def __init__(self, stage: str, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"a stage needs at least one worker thread, got {workers}")
        self.stage = stage
        self.workers = workers
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=f"ragtime-{stage}")

    async def run(self, fn: Callable[..., T], *args: Any, deadline: float, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on this stage's threads, waited for until ``deadline``
        (a ``time.perf_counter()`` value)."""
        return await run_before(deadline, self.stage, fn, *args, executor=self._pool, **kwargs)

    def close(self) -> None:
        """Stop the threads once their current work ends; queued work is dropped."""
        self._pool.shutdown(wait=False, cancel_futures=True)
