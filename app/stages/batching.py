"""Micro-batching: one model call for the questions of every concurrent request.

A stage's model (the embedder, the moderation classifier) costs little more for eight short
texts than for one. ``MicroBatcher`` sends a text on at once while one of the stage's threads is
free, so a lone request waits for nothing; while every thread is busy, the texts that arrive
gather, and the next free thread takes them all (up to ``max_batch``) in one call. Under load a
request waits no longer than it would have for a thread anyway, and the model is called fewer
times. Each caller learns the size of the batch it rode in and how long it waited for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from app.stages.threads import StageThreads
from tracing.budget import DeadlinePassed

ItemT = TypeVar("ItemT")
ResultT = TypeVar("ResultT")


@dataclass(frozen=True)
class Batched(Generic[ResultT]):
    """One caller's result, the size of the batch it was computed in, and the time it waited
    for a thread before the batch started."""

    value: ResultT
    batch_size: int
    wait_ms: float


@dataclass(eq=False)
class _Waiting(Generic[ItemT, ResultT]):
    item: ItemT
    deadline: float
    future: asyncio.Future[Batched[ResultT]]
    queued_at: float


class MicroBatcher(Generic[ItemT, ResultT]):
    """Runs ``fn(items) -> results`` (one result per item, in order) on ``threads``, batching
    the items of callers that arrive while every thread is busy."""

    def __init__(
        self,
        fn: Callable[[list[ItemT]], Sequence[ResultT]],
        threads: StageThreads,
        *,
        max_batch: int = 32,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        self.fn = fn
        self.threads = threads
        self.max_batch = max_batch
        self._waiting: list[_Waiting[ItemT, ResultT]] = []
        self._running = 0

    async def submit(self, item: ItemT, *, deadline: float) -> Batched[ResultT]:
        """``fn`` of ``item``, in whatever batch it joins; ``DeadlinePassed`` if the deadline
        comes first (the batch itself goes on for the others)."""
        loop = asyncio.get_running_loop()
        waiting = _Waiting[ItemT, ResultT](
            item, deadline, loop.create_future(), time.perf_counter()
        )
        self._waiting.append(waiting)
        self._dispatch()
        timeout_s = max(deadline - time.perf_counter(), 0.0)
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(waiting.future)
        except TimeoutError:
            if waiting in self._waiting:  # not started yet: it need not be computed at all
                self._waiting.remove(waiting)
            # Nobody will read the outcome now; read it when it comes, so a failure is not
            # reported as never retrieved.
            waiting.future.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise DeadlinePassed(f"the {self.threads.stage} stage ran past the deadline") from None

    def _dispatch(self) -> None:
        while self._waiting and self._running < self.threads.workers:
            batch = self._waiting[: self.max_batch]
            del self._waiting[: self.max_batch]
            self._running += 1
            task = asyncio.ensure_future(self._run_batch(batch))
            task.add_done_callback(self._finished)

    def _finished(self, _: asyncio.Future[None]) -> None:
        self._running -= 1
        self._dispatch()

    async def _run_batch(self, batch: list[_Waiting[ItemT, ResultT]]) -> None:
        started = time.perf_counter()
        items = [w.item for w in batch]
        try:
            results = await self.threads.call(
                self.fn, items, deadline=max(w.deadline for w in batch)
            )
            if len(results) != len(batch):
                raise RuntimeError(f"{len(batch)} items gave {len(results)} results")
        except BaseException as exc:
            for w in batch:
                if not w.future.done():
                    w.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for w, result in zip(batch, results, strict=True):
            if not w.future.done():
                wait_ms = (started - w.queued_at) * 1000.0
                w.future.set_result(Batched(result, len(batch), wait_ms))
