"""The event loop's lag: how late the loop runs what is due, measured as the service runs.

A request's bytes reach the socket before the loop gets round to them, and an answer's last
event leaves after the loop gets round to it: under a burst both waits grow, and a budget that
ignores them is kept on the server's clock and broken on the client's. ``LoopLag.measure`` sleeps
``interval_s`` again and again and records how late it woke; ``ms()`` is the largest lag of the
last ``window_s`` (a quarter of a second: the lag of now, not of a start-up long past), each
halved for every ``half_life_s`` of its age, or the stall going on now if that is longer. The
budget counts it: arrivals that no read of ours timed are stamped that much earlier
(``app.frontdoor.middleware.ArrivalMiddleware``), answers keep that much more in reserve
(``tracing.budget.session``), and admission predicts with it (``app.frontdoor.gate``). It is
published as ``ragtime_event_loop_lag_seconds``, and every measurement goes into the histogram
``ragtime_event_loop_lag_measured_seconds`` (what ``ragtime bench burst`` reads of a burst).

Why halved with age: a burst's admitted requests leave their stages together, and the loop then
runs all their answers' ends in one go: one such stretch measured 135-160 ms, after which the
lag was 20-30 ms. Counted whole for a quarter of a second, it was kept in reserve by every
answer that began generating meanwhile; those with less time left than that ended in 504
("no answer token came before the deadline") with 120-210 ms of their budget left, where the answers
begun beside them were all sent within 90 ms (docs/studies/bursts-and-admission.md, "The regression
fixed"). A stall 50 ms past counts half, 100 ms past a quarter.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from tracing.metrics import LOOP_LAG_MEASURED_SECONDS, LOOP_LAG_SECONDS


class LoopLag:
    """The recent lags of one event loop (one per app: ``app.main``)."""

    def __init__(
        self,
        *,
        interval_s: float = 0.01,
        window_s: float = 0.25,
        half_life_s: float | None = 0.05,
    ) -> None:
        self.interval_s = interval_s
        self.window_s = window_s
        self.half_life_s = half_life_s
        """None: every lag in the window counts whole."""
        self._samples: deque[tuple[float, float]] = deque()
        self._due: float | None = None
        """When the measuring task is next due to wake (None when it is not running)."""
        self.listeners: list[Callable[[float], None]] = []
        """Called with each measurement, in ms, on the loop (admission learns from them)."""

    def record(self, lag_ms: float, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        self._samples.append((now, max(lag_ms, 0.0)))
        while self._samples and self._samples[0][0] < now - self.window_s:
            self._samples.popleft()

    def ms(self, now: float | None = None) -> float:
        """The largest lag within the window, each halved for every ``half_life_s`` of its
        age, or the stall going on now (the measuring task overdue) if that is longer; 0 when
        the loop is idle or not measured. Safe from another thread (the read-ahead thread
        decides admission while the loop may be stalled): it reads copies, taken at once, of
        what the loop records."""
        now = time.perf_counter() if now is None else now
        samples, due = tuple(self._samples), self._due
        ongoing = (now - due) * 1000.0 if due is not None else 0.0
        recent = max(
            (self._aged(lag, now - at) for at, lag in samples if at >= now - self.window_s),
            default=0.0,
        )
        return max(recent, ongoing)

    def _aged(self, lag_ms: float, age_s: float) -> float:
        return lag_ms if self.half_life_s is None else lag_ms * 0.5 ** (age_s / self.half_life_s)

    async def measure(self) -> None:
        """Measure until cancelled."""
        try:
            while True:
                due = self._due = time.perf_counter() + self.interval_s
                await asyncio.sleep(self.interval_s)
                now = time.perf_counter()
                lag_ms = (now - due) * 1000.0
                self.record(lag_ms, now)
                for listener in self.listeners:
                    listener(lag_ms)
                LOOP_LAG_MEASURED_SECONDS.observe(max(lag_ms, 0.0) / 1000.0)
                LOOP_LAG_SECONDS.set(self.ms(now) / 1000.0)
        finally:
            self._due = None
