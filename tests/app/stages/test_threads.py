"""A stage's own threads: work is waited for until the deadline, and work abandoned there holds
a thread of its own stage only."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path

import pytest

from app.stages import StageThreads
from tracing.budget import CostModel, DeadlinePassed


async def test_runs_the_work_and_returns_its_result() -> None:
    threads = StageThreads("embed", 1, costs=CostModel())
    try:
        name = await threads.call(
            lambda: threading.current_thread().name, deadline=time.perf_counter() + 5
        )
    finally:
        threads.close()
    assert name.startswith("ragtime-embed")


async def test_work_past_the_deadline_raises_and_leaves_other_stages_free() -> None:
    release = threading.Event()
    slow, other = (
        StageThreads("rerank", 1, costs=CostModel()),
        StageThreads("search", 1, costs=CostModel()),
    )
    try:
        with pytest.raises(DeadlinePassed, match="rerank stage ran past the deadline"):
            await slow.call(release.wait, 10, deadline=time.perf_counter() + 0.05)
        # The abandoned wait still holds rerank's one thread; search's is free.
        started = time.perf_counter()
        assert await other.call(lambda: 7, deadline=time.perf_counter() + 1) == 7
        assert time.perf_counter() - started < 0.5
        with pytest.raises(DeadlinePassed):
            await slow.call(lambda: 1, deadline=time.perf_counter() + 0.05)
    finally:
        release.set()
        slow.close()
        other.close()


async def test_a_deadline_already_past_runs_nothing_useful() -> None:
    threads = StageThreads("assemble", 1, costs=CostModel())
    try:
        with pytest.raises(DeadlinePassed):
            await threads.call(time.sleep, 0.2, deadline=time.perf_counter() - 1)
    finally:
        threads.close()


def test_a_stage_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least one worker thread"):
        StageThreads("embed", 0, costs=CostModel())


async def test_waiting_work_is_served_earliest_deadline_first() -> None:
    """A later deadline admitted first is served after an earlier one."""
    threads = StageThreads("embed", 1, costs=CostModel())
    release = threading.Event()
    order: list[str] = []
    now = time.perf_counter()
    try:
        blocker = asyncio.ensure_future(threads.call(release.wait, 5, deadline=now + 10))
        await asyncio.sleep(0.05)  # the one thread is held
        late = asyncio.ensure_future(threads.call(order.append, "late", deadline=now + 9))
        await asyncio.sleep(0.01)
        soon = asyncio.ensure_future(threads.call(order.append, "soon", deadline=now + 3))
        await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(blocker, late, soon)
    finally:
        threads.close()
    assert order == ["soon", "late"]


async def test_work_that_can_no_longer_make_its_deadline_is_dropped_before_it_runs() -> None:
    """At the front of the queue, a call with less time left than the stage's quickest recent
    call is refused at once, before it costs any time."""
    threads = StageThreads("embed", 1, costs=CostModel())
    release = threading.Event()
    ran: list[str] = []
    try:
        await threads.call(time.sleep, 0.3, deadline=time.perf_counter() + 5)  # quickest: 0.3 s
        now = time.perf_counter()
        blocker = asyncio.ensure_future(threads.call(release.wait, 5, deadline=now + 10))
        await asyncio.sleep(0.01)
        doomed = asyncio.ensure_future(threads.call(ran.append, "doomed", deadline=now + 0.5))
        await asyncio.sleep(0.3)
        release.set()  # its turn: about 0.2 s left, less than any recent call took
        with pytest.raises(DeadlinePassed, match="dropped before it ran"):
            await doomed
        refused_after = time.perf_counter() - now
        await blocker
    finally:
        threads.close()
    assert ran == []
    assert refused_after < 0.5  # refused before its deadline, not timed out at it
    assert threads.dropped == 1


async def test_work_abandoned_while_queued_never_runs() -> None:
    threads = StageThreads("search", 1, costs=CostModel())
    release = threading.Event()
    ran: list[str] = []
    try:
        blocker = asyncio.ensure_future(
            threads.call(release.wait, 5, deadline=time.perf_counter() + 10)
        )
        await asyncio.sleep(0.02)
        with pytest.raises(DeadlinePassed):
            await threads.call(ran.append, "x", deadline=time.perf_counter() + 0.05)
        release.set()
        await blocker
        assert await threads.call(lambda: 3, deadline=time.perf_counter() + 5) == 3
    finally:
        threads.close()
    assert ran == []


def _own_priority() -> int:
    import os

    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness: Linux")
async def test_a_stage_can_run_below_the_process_and_others_do_not() -> None:
    """Threads made with a niceness run that many steps below the process; a stage without
    one runs at the process's own; none may run above it."""
    base = _own_priority()
    low = StageThreads("attribute", 1, nice=10, costs=CostModel())
    plain = StageThreads("search", 1, costs=CostModel())
    try:
        deadline = time.perf_counter() + 5
        assert await low.call(_own_priority, deadline=deadline) == min(base + 10, 19)
        assert await plain.call(_own_priority, deadline=deadline) == base
    finally:
        low.close()
        plain.close()
    assert _own_priority() == base  # the loop's thread is untouched
    with pytest.raises(ValueError, match="lower priority"):
        StageThreads("embed", 1, nice=-1, costs=CostModel())


def test_only_the_attribute_stage_runs_below_the_process(tmp_path: Path) -> None:
    """``RAGTIME_ATTRIBUTION_NICE`` (10 by default) reaches the attribute stage's threads and
    no other stage's."""
    from app.pipeline.services import Services
    from tests.fakes.hash_embedder import HashEmbedder
    from tests.helpers.app import make_settings

    for settings, expected in (
        (make_settings(tmp_path), 10),
        (make_settings(tmp_path, attribution_nice=0), 0),
    ):
        stages = Services.build(settings, embedder=HashEmbedder(), costs=CostModel()).stages
        assert stages.attribute.threads.nice == expected
        others = [stages.embed.threads, stages.search.threads, stages.assemble.threads]
        assert [threads.nice for threads in others] == [0, 0, 0]
