"""Micro-batching: a lone caller goes at once; callers that arrive while the threads are busy
share one call; a deadline or a failure reaches only the callers it concerns."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from app.stages import StageThreads
from app.stages.batching import MicroBatcher
from tracing.budget import CostModel, DeadlinePassed


class Recorder:
    """Doubles each item; remembers the batches it was called with; waits for ``gate``."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, items: list[int]) -> list[int]:
        self.gate.wait(5)
        self.batches.append(list(items))
        return [2 * i for i in items]


def later(seconds: float = 5.0) -> float:
    return time.perf_counter() + seconds


async def test_a_lone_caller_runs_at_once_in_a_batch_of_one() -> None:
    fn = Recorder()
    batcher = MicroBatcher(fn, StageThreads("embed", 1, costs=CostModel()))
    result = await batcher.submit(21, deadline=later())
    assert (result.value, result.batch_size) == (42, 1)
    assert result.wait_ms < 1000  # no window held open for company: any wait is scheduling
    assert fn.batches == [[21]]


async def test_callers_behind_a_busy_thread_share_the_next_call() -> None:
    fn = Recorder()
    fn.gate.clear()
    batcher = MicroBatcher(fn, StageThreads("embed", 1, costs=CostModel()), max_batch=4)
    first = asyncio.ensure_future(batcher.submit(0, deadline=later()))
    await asyncio.sleep(0.02)  # the first holds the one thread
    rest = [asyncio.ensure_future(batcher.submit(i, deadline=later())) for i in range(1, 7)]
    await asyncio.sleep(0.02)
    fn.gate.set()
    results = await asyncio.gather(first, *rest)
    assert [r.value for r in results] == [2 * i for i in range(7)]
    assert fn.batches == [[0], [1, 2, 3, 4], [5, 6]]
    assert [r.batch_size for r in results] == [1, 4, 4, 4, 4, 2, 2]
    assert results[1].wait_ms >= 15  # it waited for the thread, and says so


async def test_a_caller_past_its_deadline_leaves_and_the_others_are_served() -> None:
    fn = Recorder()
    fn.gate.clear()
    batcher = MicroBatcher(fn, StageThreads("embed", 1, costs=CostModel()))
    first = asyncio.ensure_future(batcher.submit(1, deadline=later()))
    await asyncio.sleep(0.01)
    hurried = asyncio.ensure_future(batcher.submit(2, deadline=later(0.03)))
    patient = asyncio.ensure_future(batcher.submit(3, deadline=later()))
    with pytest.raises(DeadlinePassed, match="embed"):
        await hurried
    fn.gate.set()
    assert (await first).value == 2 and (await patient).value == 6
    assert [3] in fn.batches and all(2 not in b for b in fn.batches)  # never computed


async def test_a_failing_call_fails_every_caller_of_its_batch_only() -> None:
    calls = 0

    def flaky(items: list[int]) -> list[int]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("model crashed")
        return items

    batcher = MicroBatcher(flaky, StageThreads("embed", 1, costs=CostModel()))
    with pytest.raises(RuntimeError, match="model crashed"):
        await batcher.submit(1, deadline=later())
    assert (await batcher.submit(2, deadline=later())).value == 2


async def test_a_result_per_item_is_required() -> None:
    batcher = MicroBatcher[int, int](lambda items: [], StageThreads("embed", 1, costs=CostModel()))
    with pytest.raises(RuntimeError, match="1 items gave 0 results"):
        await batcher.submit(1, deadline=later())


def test_a_batch_holds_at_least_one() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        MicroBatcher(lambda items: items, StageThreads("embed", 1, costs=CostModel()), max_batch=0)
