"""py-spy attached to a live process: its samples come back, and name the busy function."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.harness.profile import Profiler, py_spy, read_samples, top_functions

BUSY = """
import time
def spin_for_the_profiler():
    end = time.monotonic() + 30
    while time.monotonic() < end:
        sum(range(1000))
print("ready", flush=True)
spin_for_the_profiler()
"""


PARENT = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {BUSY!r}], stdout=subprocess.PIPE, text=True)
print(child.stdout.readline().strip(), flush=True)
child.wait()
"""

needs_py_spy = pytest.mark.skipif(
    py_spy() is None, reason="py-spy is not installed (the bench extra)"
)


def profile(script: str, path: Path) -> Path:
    """Run ``script`` until it says ``ready``, sample it (and its children) for 1.5 s into
    ``path``, then end it and its children."""
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        profiler = Profiler(process.pid, path, rate=100)
        time.sleep(1.5)
        profiler.stop()
    finally:
        subprocess.run(["pkill", "-P", str(process.pid)], check=False)
        process.kill()
        process.wait()
    return path


@pytest.mark.process
@needs_py_spy
def test_py_spy_samples_a_busy_process(tmp_path: Path) -> None:
    path = profile(BUSY, tmp_path / "busy.txt")
    assert read_samples(path)
    total, shares = top_functions(path)
    busy = next(s for s in shares if s.function.startswith("spin_for_the_profiler"))
    assert total > 20 and busy.inclusive > 0.9


@pytest.mark.process
@needs_py_spy
def test_a_server_of_several_processes_is_sampled_in_its_children(tmp_path: Path) -> None:
    """``ragtime serve --workers N``'s work is in its children, not in the supervisor."""
    total, shares = top_functions(profile(PARENT, tmp_path / "busy.txt"))
    assert total > 20
    assert any(s.function.startswith("spin_for_the_profiler") for s in shares)


def test_a_missing_profile_is_reported_not_raised(tmp_path: Path) -> None:
    empty = tmp_path / "none.txt"
    empty.write_text("")
    assert top_functions(empty) == (0, [])
