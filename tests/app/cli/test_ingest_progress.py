"""The progress line of ``ragtime ingest``: what it says, and at most one a second."""

from __future__ import annotations

import io

import pytest

from app.cli.ingest_progress import ProgressPrinter, progress_line
from app.settings import Settings
from retrieval import IngestProgress


def test_the_line_says_files_rate_and_time_left() -> None:
    line = progress_line(IngestProgress(12, 500, 1840, 30.0, 1_000, 41_000))
    assert line == "files 12/500, 1840 chunks, 61.3 chunks/s, 20m00s left"
    assert progress_line(IngestProgress(0, 3, 0, 0.0, 0, 10)).endswith("0.0 chunks/s, ? left")
    assert "1h05m left" in progress_line(IngestProgress(1, 9, 5, 3900.0, 1, 2))


def test_lines_are_throttled_but_the_last_file_always_prints() -> None:
    now = [0.0]
    out = io.StringIO()
    printer = ProgressPrinter(out, interval_s=1.0, clock=lambda: now[0])
    for done, at in [(1, 0.0), (2, 0.3), (3, 0.9), (4, 1.2), (5, 1.5), (6, 1.6)]:
        now[0] = at
        printer(IngestProgress(done, 6, done * 10, at, done, 6))
    printed = [line.split(",")[0] for line in out.getvalue().splitlines()]
    assert printed == ["files 1/6", "files 4/6", "files 6/6"]


def test_overlap_must_be_less_than_the_chunk_size() -> None:
    with pytest.raises(ValueError, match="chunk_overlap_tokens"):
        Settings(_env_file=None, chunk_tokens=64, chunk_overlap_tokens=64)
    settings = Settings(_env_file=None, chunk_tokens=64, chunk_overlap_tokens=8)
    assert (settings.chunk_tokens, settings.chunk_overlap_tokens) == (64, 8)


def test_the_state_held_back_is_printed_when_ingest_stops() -> None:
    now = [0.0]
    out = io.StringIO()
    printer = ProgressPrinter(out, interval_s=1.0, clock=lambda: now[0])
    with pytest.raises(OSError), printer.finally_last():
        printer(IngestProgress(1, 6, 10, 0.1, 1, 6))
        now[0] = 0.5
        printer(IngestProgress(2, 6, 20, 0.5, 2, 6))  # held back by the throttle
        raise OSError(28, "No space left on device")
    printed = [line.split(",")[0] for line in out.getvalue().splitlines()]
    assert printed == ["files 1/6", "files 2/6"]
    with printer.finally_last():  # nothing held, nothing raised: nothing more printed
        pass
    assert len(out.getvalue().splitlines()) == 2
