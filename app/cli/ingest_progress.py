"""The progress line ``ragtime ingest`` writes to stderr: files done of all, chunks per second
and the time left, at most once a second (and always for the last file, and for the last state
reached when ingest stops on an error)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from retrieval.ingest.report import IngestProgress


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
        self._held: IngestProgress | None = None  # the latest state not printed

    def __call__(self, progress: IngestProgress) -> None:
        now = self._clock()
        last_file = progress.files_done >= progress.files_total
        if not last_file and self._last is not None and now - self._last < self._interval_s:
            self._held = progress
            return
        self._last, self._held = now, None
        print(progress_line(progress), file=self._stream or sys.stderr, flush=True)

    @contextmanager
    def finally_last(self) -> Iterator[None]:
        """Print the latest state held back by the throttle if the block raises: how far an
        ingest got before it stopped."""
        try:
            yield
        except BaseException:
            if self._held is not None:
                print(progress_line(self._held), file=self._stream or sys.stderr, flush=True)
                self._held = None
            raise
