"""``ragtime ingest`` prints only its own lines (issue 23 §3): progress, the summary, copies and
failures, and ragtime's own log lines; no library's (faiss's loader told at every start how it
looked for its AVX builds, a ``ModuleNotFoundError`` among them)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.carried_documents import make_thread
from tests.helpers.processes import ROOT, run_ingest

pytestmark = pytest.mark.process

#: What ragtime itself writes to stderr during an ingest.
OWN_LINE = re.compile(
    r"^(files \d+/\d+, .*"
    r"|copy: .*"
    r"|failed: .*"
    r"|(INFO|WARNING|ERROR) (ragtime|app|retrieval|inference|tracing)[.:].*)$"
)


def test_an_ingest_prints_only_its_own_lines(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nLists hold items in order.\n")
    (folder / "b.md").write_text("# A\n\nLists hold items in order.\n")
    make_thread(folder / "thread.eml")
    done = run_ingest(tmp_path / "data", folder)
    assert done.returncode == 0, done.stderr
    [summary] = done.stdout.splitlines()
    assert summary.startswith("ingested 2 file(s)") and "4 attachment(s)" in summary
    assert "1 file(s) recorded as copies" in summary
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert [line for line in lines if not OWN_LINE.match(line)] == [], done.stderr
    assert "copy: b.md: the same bytes as a.md, searchable as both" in lines
    assert any(line.startswith("failed: thread.eml#chart.png: ") for line in lines)


def test_library_loggers_say_only_warnings() -> None:
    """Importing FAISS after the CLI set logging up prints nothing; with logging at INFO (as
    the CLI had it), its loader's lines show: the check above would see them."""
    quiet = "from app.cli import commands; commands.configure_logging(); import faiss"
    loud = "import logging; logging.basicConfig(level=logging.INFO); import faiss"
    outputs = [
        subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        for code in (quiet, loud)
    ]
    assert outputs[0].returncode == 0 and outputs[0].stderr == "", outputs[0].stderr
    assert "faiss.loader" in outputs[1].stderr
