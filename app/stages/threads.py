"""Each stage's own bounded pool of worker threads, serving its queue earliest deadline first.

Blocking work (torch, FAISS, SQLite, a classifier) never runs on the event loop. A thread cannot
be killed: work abandoned at a deadline keeps its thread until it finishes. With a pool per stage
it holds a slot of that stage's pool only, so a slow reranker cannot starve embedding or search.

Work waits for a thread in deadline order, not arrival order: under load, a request due sooner
is not stuck behind one that can wait (issue 13, admission control). At the front of the queue
a call is dropped, before it costs any time, when its deadline can no longer be met: it has
passed, or what is left is shorter than the least a call of the stage needs
(``DeadlinePassed``, as for a call that runs past its deadline). That least is the cost model's
(``CostModel.quickest_call_ms``): the threads teach it each call's time, and a drop ages what
it learned. Work abandoned while queued (its request timed out or went away) never runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import heapq
import itertools
import math
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tracing.budget import CostModel, DeadlinePassed

T = TypeVar("T")


@dataclass(order=True)
class _Queued:
    due: float
    arrival: int
    future: Future[Any] = field(compare=False)
    call: Callable[[], Any] = field(compare=False)


class StageThreads:
    """``workers`` threads for one stage, earliest deadline first; ``call`` raises
    ``DeadlinePassed`` at the deadline, or at once when the call can no longer make it."""

    def __init__(self, stage: str, workers: int, *, costs: CostModel, nice: int = 0) -> None:
        if workers < 1:
            raise ValueError(f"a stage needs at least one worker thread, got {workers}")
        if nice < 0:
            raise ValueError(f"a stage's threads may only run at a lower priority, got {nice}")
        self.stage = stage
        self.workers = workers
        self.nice = nice
        """How much lower than the process the threads run (Linux thread niceness; 0: same)."""
        self._queue: list[_Queued] = []
        self._arrivals = itertools.count()
        self._ready = threading.Condition()
        self._closed = False
        self.costs = costs
        """The process's cost model, taught each call's time."""
        self.dropped = 0
        """Calls dropped at the front of the queue, their deadline out of reach."""
        self._threads: list[threading.Thread] = []  # started by the first call

    @property
    def quickest_s(self) -> float:
        """What a call of the stage needs at least, by the cost model (0 before any call)."""
        return self.costs.quickest_call_ms(self.stage) / 1000.0

    async def call(self, fn: Callable[..., T], *args: Any, deadline: float, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` on this stage's threads, queued by ``deadline`` and waited for
        until then (a ``time.perf_counter()`` value). The call sees the caller's context (its
        current span), as ``asyncio.to_thread`` would give it."""
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        future: Future[T] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError(f"the {self.stage} stage's threads are closed")
            due = deadline if math.isfinite(deadline) else math.inf
            heapq.heappush(self._queue, _Queued(due, next(self._arrivals), future, call))
            self._ready.notify()
            if not self._threads:
                self._start()
        work = asyncio.wrap_future(future)  # cancelling it cancels ``future`` if still queued
        try:
            async with asyncio.timeout(max(deadline - time.perf_counter(), 0.0)):
                return await work
        except TimeoutError:
            raise DeadlinePassed(f"the {self.stage} stage ran past the deadline") from None

    def _start(self) -> None:
        for i in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"ragtime-{self.stage}-{i}")
            thread.daemon = True
            thread.start()
            self._threads.append(thread)

    def _next(self) -> tuple[float, Future[Any], Callable[[], Any]] | None:
        with self._ready:
            while not self._queue and not self._closed:
                self._ready.wait()
            if not self._queue:
                return None
            queued = heapq.heappop(self._queue)
            return queued.due, queued.future, queued.call

    def _work(self) -> None:
        if self.nice:
            lower_priority(self.nice)
        while (job := self._next()) is not None:
            due, future, call = job
            if not future.set_running_or_notify_cancel():
                continue  # abandoned while queued
            if due - time.perf_counter() < self.quickest_s:
                self.dropped += 1
                self.costs.observe_call_drop(self.stage)
                future.set_exception(
                    DeadlinePassed(
                        f"the {self.stage} stage could not finish before the deadline: "
                        "dropped before it ran"
                    )
                )
                continue
            started = time.perf_counter()
            try:
                result = call()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)
            finally:
                self.costs.observe_call(self.stage, (time.perf_counter() - started) * 1000.0)

    def close(self) -> None:
        """Stop the threads once their current work ends; queued work is dropped."""
        with self._ready:
            self._closed = True
            queued, self._queue = self._queue, []
            self._ready.notify_all()
        for job in queued:
            job.future.cancel()


def lower_priority(nice: int) -> None:
    """Run the calling thread ``nice`` steps below the process (Linux schedules each thread
    on its own; lowering needs no privilege). Elsewhere, or where the system refuses, the
    thread keeps the process's priority."""
    if not sys.platform.startswith("linux"):
        return
    me = threading.get_native_id()
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, me, os.getpriority(os.PRIO_PROCESS, me) + nice)
