"""A plain progress bar on stderr, redrawn at most ten times a second, only on a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(
        self, label: str, total: int | None = None, *, stream: TextIO | None = None
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self._started = time.monotonic()
        self._drawn = 0.0

    def update(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if self.enabled and now - self._drawn >= 0.1:
            self._drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = now - self._started
        if self.total:
            filled = int(30 * min(self.done, self.total) / self.total)
            bar = "#" * filled + "." * (30 - filled)
            text = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s"
        else:
            text = f"{self.label} {self.done} requests {elapsed:5.1f}s"
        self.stream.write("\r" + text[:120])
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()
