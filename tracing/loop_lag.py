"""The event loop's lag: how late the loop runs what is due, measured as the service runs.

A request's bytes reach the socket before the loop gets round to them, and an answer's last
event leaves after the loop gets round to it: under a burst both waits grow, and a budget that
ignores them is kept on the server's clock and broken on the client's. ``LoopLag.run`` sleeps
``interval_s`` again and again and records how late it woke; ``ms()`` is the largest lag of the
last ``window_s`` (a quarter of a second: the lag of now, not of a start-up long past), which the
budget counts: arrivals are stamped that much earlier
(``tracing.metrics.RequestMetricsMiddleware``), answers keep that much more in reserve
(``tracing.budget.session``), and admission predicts with it (``app.admission``). It is
published as ``ragtime_event_loop_lag_seconds``, and every measurement goes into the histogram
``ragtime_event_loop_lag_measured_seconds`` (what ``ragtime bench burst`` reads of a burst).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from tracing.metrics import LOOP_LAG_MEASURED_SECONDS, LOOP_LAG_SECONDS


class LoopLag:
    """The recent lags of one event loop (one per app: ``app.main``)."""

    def __init__(self, *, interval_s: float = 0.01, window_s: float = 0.25) -> None:
        self.interval_s = interval_s
        self.window_s = window_s
        self._samples: deque[tuple[float, float]] = deque()

    def record(self, lag_ms: float, now: float | None = None) -> None:
        now = time.perf_counter() if now is None else now
        self._samples.append((now, max(lag_ms, 0.0)))
        while self._samples and self._samples[0][0] < now - self.window_s:
            self._samples.popleft()

    def ms(self, now: float | None = None) -> float:
        """The largest lag within the window (0 when the loop is idle or not measured). Safe
        from another thread: it reads a copy, taken at once, of what the loop records."""
        now = time.perf_counter() if now is None else now
        samples = tuple(self._samples)
        return max((lag for at, lag in samples if at >= now - self.window_s), default=0.0)

    async def run(self) -> None:
        """Measure until cancelled."""
        while True:
            due = time.perf_counter() + self.interval_s
            await asyncio.sleep(self.interval_s)
            now = time.perf_counter()
            lag_ms = (now - due) * 1000.0
            self.record(lag_ms, now)
            LOOP_LAG_MEASURED_SECONDS.observe(max(lag_ms, 0.0) / 1000.0)
            LOOP_LAG_SECONDS.set(self.ms(now) / 1000.0)
