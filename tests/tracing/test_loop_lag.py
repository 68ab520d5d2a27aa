"""The event loop's lag (``tracing.loop_lag``): measured while the loop is blocked. (What the
arrival stamp counts of it: ``tests/app/frontdoor/test_arrival.py``.)"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

from tracing.loop_lag import LoopLag
from tracing.metrics import REGISTRY

MEASURED = "ragtime_event_loop_lag_measured_seconds"


def _measured(le: str) -> float:
    return REGISTRY.get_sample_value(f"{MEASURED}_bucket", {"le": le}) or 0.0


def test_the_largest_lag_within_the_window_counts() -> None:
    lag = LoopLag(window_s=1.0, half_life_s=None)  # no halving: the window alone
    lag.record(5.0, now=10.0)
    lag.record(80.0, now=10.2)
    lag.record(3.0, now=10.9)
    assert lag.ms(now=11.0) == 80.0
    assert lag.ms(now=11.5) == 3.0  # the 80 ms lag left the window
    assert LoopLag().ms() == 0.0


def test_a_lag_counts_half_for_every_half_life_of_its_age() -> None:
    lag = LoopLag(window_s=1.0, half_life_s=0.05)
    lag.record(160.0, now=10.0)  # a burst's answers ending together
    assert lag.ms(now=10.0) == 160.0
    assert abs(lag.ms(now=10.05) - 80.0) < 1e-6
    assert abs(lag.ms(now=10.1) - 40.0) < 1e-6
    lag.record(30.0, now=10.1)  # the lag of now, after the stretch
    assert abs(lag.ms(now=10.15) - max(20.0, 15.0)) < 1e-6
    assert lag.ms(now=11.2) == 0.0  # both left the window


async def test_a_stall_going_on_counts_for_another_thread() -> None:
    """The read-ahead thread decides admission while the loop may be stalled: the stall is
    counted before the measuring task wakes to record it."""
    lag = LoopLag(interval_s=0.005, half_life_s=1e-6)  # recorded lags are forgotten at once
    task = asyncio.create_task(lag.measure())
    await asyncio.sleep(0.02)
    seen: list[float] = []

    def look() -> None:
        time.sleep(0.05)
        seen.append(lag.ms())

    reader = threading.Thread(target=look)
    reader.start()
    time.sleep(0.5)  # the loop is blocked; the reader looks about 50 ms into it
    reader.join()
    await asyncio.sleep(0.02)
    task.cancel()
    assert seen[0] >= 40.0
    with contextlib.suppress(asyncio.CancelledError):
        await task
    # Once recorded, the stall is past (and forgotten); with the measuring stopped, none is
    # going on. Read after the stop: while measuring, how soon the task runs again is the
    # machine's speed.
    assert lag.ms() < 40.0
    assert lag.ms(now=time.perf_counter() + 10.0) == 0.0


async def test_a_blocked_loop_is_measured() -> None:
    total, under_50ms = _measured("+Inf"), _measured("0.05")
    lag = LoopLag(interval_s=0.005, half_life_s=None)
    task = asyncio.create_task(lag.measure())
    await asyncio.sleep(0.02)
    time.sleep(0.1)  # the loop is blocked: the measuring task wakes at least 95 ms late
    await asyncio.sleep(0.02)
    task.cancel()
    assert lag.ms() >= 90.0
    # Every measurement goes into the histogram too: several, one of them over 50 ms.
    measured = _measured("+Inf") - total
    assert measured >= 3 and measured - (_measured("0.05") - under_50ms) >= 1
