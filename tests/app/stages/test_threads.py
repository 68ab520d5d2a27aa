"""A stage's own threads: work is waited for until the deadline, and work abandoned there holds
a thread of its own stage only."""

from __future__ import annotations

import threading
import time

import pytest

from app.stages import StageThreads
from tracing.budget import DeadlinePassed


async def test_runs_the_work_and_returns_its_result() -> None:
    threads = StageThreads("embed", 1)
    try:
        name = await threads.run(
            lambda: threading.current_thread().name, deadline=time.perf_counter() + 5
        )
    finally:
        threads.close()
    assert name.startswith("ragtime-embed")


async def test_work_past_the_deadline_raises_and_leaves_other_stages_free() -> None:
    release = threading.Event()
    slow, other = StageThreads("rerank", 1), StageThreads("search", 1)
    try:
        with pytest.raises(DeadlinePassed, match="rerank stage ran past the deadline"):
            await slow.run(release.wait, 10, deadline=time.perf_counter() + 0.05)
        # The abandoned wait still holds rerank's one thread; search's is free.
        started = time.perf_counter()
        assert await other.run(lambda: 7, deadline=time.perf_counter() + 1) == 7
        assert time.perf_counter() - started < 0.5
        with pytest.raises(DeadlinePassed):
            await slow.run(lambda: 1, deadline=time.perf_counter() + 0.05)
    finally:
        release.set()
        slow.close()
        other.close()


async def test_a_deadline_already_past_runs_nothing_useful() -> None:
    threads = StageThreads("assemble", 1)
    try:
        with pytest.raises(DeadlinePassed):
            await threads.run(time.sleep, 0.2, deadline=time.perf_counter() - 1)
    finally:
        threads.close()


def test_a_stage_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least one worker thread"):
        StageThreads("embed", 0)
