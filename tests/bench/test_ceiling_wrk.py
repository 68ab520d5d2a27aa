"""The real wrk (Debian's package; ``make test`` installs it) with ``open_loop.lua``, briefly
against the floor: its JSON bodies are read, its responses end in ``done``, a route that answers
404 counts as bad. Counts only: nothing here depends on the machine's speed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.harness.serve import floor_server
from bench.suites.ceiling.wrk import run_wrk, write_bodies, wrk_version


@pytest.mark.process
def test_wrk_sends_the_bodies_on_a_schedule_and_counts_bad_answers(tmp_path: Path) -> None:
    assert shutil.which("wrk"), "wrk is not installed (make test installs it)"
    assert wrk_version().startswith("wrk ")
    bodies = write_bodies(["one?", 'a "quoted" two?'], tmp_path / "bodies.txt")
    with floor_server(4, log_dir=tmp_path) as floor:
        good = run_wrk("floor", floor.url, bodies=bodies, rate=40, seconds=1, seed=1, lead_s=0.2)
        wrong = run_wrk("floor", f"{floor.url}/nowhere", bodies=bodies, rate=40, seconds=1)
    assert good.answered > 0 and good.sent >= good.answered
    assert (good.bad, good.transport_errors, good.timeouts, good.error_ratio) == (0, 0, 0, 0.0)
    assert good.latency_ms.n == good.answered and good.latency_ms.p50 is not None
    assert good.connections == 16 and good.seconds > 0
    assert wrong.answered > 0 and wrong.bad == wrong.answered and wrong.error_ratio == 1.0
