"""The progress line ``ragtime ingest`` writes to stderr: files done of all, chunks per second
and the time left, at most once a second (and always for the last file)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from retrieval.ingest import IngestProgress


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = round(seconds)
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def progress_line(progress: IngestProgress) -> str:
    """``files 12/500, 1840 chunks, 61.2 chunks/s, 2m05s left``."""
    return (
        f"files {progress.files_done}/{progress.files_total}, {progress.chunks} chunks, "
        f"{progress.chunks_per_s:.1f} chunks/s, {_duration(progress.eta_s)} left"
    )


class ProgressPrinter:
    """An ``on_progress`` callback for ``ingest_path`` that prints a line every ``interval_s``."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._interval_s = interval_s
        self._clock = clock
        self._last: float | None = None

    def __call__(self, progress: IngestProgress) -> None:
        now = self._clock()
        last_file = progress.files_done >= progress.files_total
        if not last_file and self._last is not None and now - self._last < self._interval_s:
            return
        self._last = now
        print(progress_line(progress), file=self._stream or sys.stderr, flush=True)
