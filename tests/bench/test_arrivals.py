"""Open-loop pacing (Poisson, seeded, on schedule even when requests are slow) and closed loops."""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time

import pytest

from bench.harness.arrivals import closed_loop, open_loop, poisson_offsets


def test_mean_gap_is_one_over_the_rate() -> None:
    offsets = poisson_offsets(50.0, count=20_000, seed=1)
    gaps = [b - a for a, b in zip([0.0, *offsets], offsets, strict=False)]
    assert len(offsets) == 20_000
    assert statistics.fmean(gaps) == pytest.approx(1 / 50.0, rel=0.03)
    # Exponential gaps: the standard deviation equals the mean.
    assert statistics.pstdev(gaps) == pytest.approx(1 / 50.0, rel=0.05)
    assert all(b > a for a, b in itertools.pairwise(offsets))


def test_same_seed_same_schedule() -> None:
    assert poisson_offsets(10.0, count=100, seed=7) == poisson_offsets(10.0, count=100, seed=7)
    assert poisson_offsets(10.0, count=100, seed=7) != poisson_offsets(10.0, count=100, seed=8)


def test_duration_bounds_the_schedule() -> None:
    offsets = poisson_offsets(200.0, duration_s=30.0, seed=3)
    assert offsets[-1] < 30.0
    assert len(offsets) == pytest.approx(6000, rel=0.05)
    assert offsets == poisson_offsets(200.0, duration_s=30.0, seed=3)


@pytest.mark.parametrize(
    "kwargs", [{}, {"count": 1, "duration_s": 1.0}, {"count": -1}, {"rate": 0.0, "count": 1}]
)
def test_bad_arguments(kwargs: dict[str, float]) -> None:
    rate = kwargs.pop("rate", 1.0)
    with pytest.raises(ValueError):
        poisson_offsets(rate, **kwargs)  # type: ignore[arg-type]


async def test_open_loop_keeps_its_schedule_while_requests_are_slow() -> None:
    offsets = poisson_offsets(40.0, count=30, seed=2)  # 0.75 s of arrivals, 12 in flight
    started: dict[int, tuple[float, float]] = {}

    async def dispatch(index: int, due: float) -> None:
        started[index] = (due, time.perf_counter())
        await asyncio.sleep(0.3)  # far longer than the mean gap: a closed loop would fall behind

    wall = await open_loop(offsets, dispatch)
    assert sorted(started) == list(range(30))
    dues = [started[i][0] for i in range(30)]
    # ``due`` is the schedule itself, anchored at the loop's start.
    assert [d - dues[0] for d in dues] == pytest.approx([o - offsets[0] for o in offsets])
    lags = [actual - due for due, actual in started.values()]
    assert min(lags) >= 0.0
    assert statistics.median(lags) < 0.01 and max(lags) < 0.1  # a noisy 2-core machine
    assert wall == pytest.approx(offsets[-1] + 0.3, abs=0.2)


async def test_open_loop_bounds_requests_in_flight() -> None:
    in_flight = peak = 0

    async def dispatch(index: int, due: float) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1

    await open_loop([0.0] * 20, dispatch, max_in_flight=4)
    assert peak == 4


async def test_closed_loop_runs_n_users_for_a_count() -> None:
    in_flight = peak = 0
    seen: list[int] = []

    async def dispatch(index: int, due: float) -> None:
        nonlocal in_flight, peak
        seen.append(index)
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1

    await closed_loop(3, dispatch, count=10)
    assert sorted(seen) == list(range(10)) and peak == 3


async def test_closed_loop_for_a_duration() -> None:
    """It starts requests until the duration is over, none after, and waits for the last:
    what a slower machine changes is how many, never when the last one began."""
    dues: list[float] = []

    async def dispatch(index: int, due: float) -> None:
        dues.append(due)
        await asyncio.sleep(0.02)

    began = time.perf_counter()
    wall = await closed_loop(2, dispatch, duration_s=0.2)
    assert len(dues) >= 2  # each user sent one at least
    # None began after the duration: each is stamped just after the loop's check of it, so one
    # a moment late is a descheduled thread; one a request (20 ms) or more late, a missed check.
    assert all(due < began + 0.2 + 0.02 for due in dues)
    assert wall >= 0.2  # the last ones, begun before the end, were waited for
