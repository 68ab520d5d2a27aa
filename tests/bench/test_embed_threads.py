"""``ragtime bench embed-threads``: both ONNX sessions timed on each batch size."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_the_bench_times_both_sessions_on_each_size(tmp_path: Path) -> None:
    """Run as a user would (the ``ragtime`` CLI): a row per size, both sessions in it, and the
    JSON with each session's wall and CPU time; the ONNX export goes to ``--cache-dir``."""
    out = tmp_path / "threads.json"
    command = [sys.executable, "-m", "app.cli", "bench", "embed-threads", "--sizes", "1,3"]
    command += ["--rounds", "1", "--cache-dir", str(tmp_path / "onnx"), "--json", str(out)]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=300,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("| texts | padded tokens |") and len(lines) == 4
    assert [line.split("|")[1].strip() for line in lines[2:]] == ["1", "3"]
    rows = json.loads(out.read_text())["rows"]
    assert {(r["texts"], r["session"]) for r in rows} == {
        (size, session) for size in (1, 3) for session in ("one thread", "thread per core")
    }
    assert all(r["wall_ms"] > 0 and r["cpu_ms"] > 0 for r in rows)
    assert list((tmp_path / "onnx").glob("*/model.int8.onnx"))
