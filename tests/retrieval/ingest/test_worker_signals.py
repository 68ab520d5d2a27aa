"""A Ctrl-C in the terminal of a server that has handled an upload prints no traceback from its
idle ingest worker, which goes on serving until its parent stops it (issue 43: a
``KeyboardInterrupt`` traceback from the worker followed every Ctrl-C after an upload)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

#: A parent, as ``ragtime serve`` is one: it prepares an upload in a worker, prints the worker's
#: pid, takes Ctrl-C as a server does (it goes on), and on a line from stdin prepares another
#: upload and prints the pid of the worker that did it.
PARENT = """
import asyncio, signal, sys
from retrieval.formats import ParseLimits
from retrieval.ingest.workers import IngestWorkers, PrepareJob
from tests.fakes.hash_embedder import HashEmbedder

signal.signal(signal.SIGINT, lambda *_: print("parent: SIGINT", file=sys.stderr, flush=True))
workers = IngestWorkers(max_workers=1)
job = PrepareJob([("a.md", b"# A\\n\\nLists hold items.\\n")], {}, HashEmbedder(), 64, 8,
                 ParseLimits())

async def upload() -> None:
    prepared = await workers.prepare(job)
    assert prepared is not None
    print(workers.pids[0], flush=True)

try:
    asyncio.run(upload())
    sys.stdin.readline()
    asyncio.run(upload())
finally:
    workers.close()
"""


@pytest.mark.process
def test_ctrl_c_after_an_upload_reaches_the_server_not_its_worker() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        start_new_session=True,  # a process group of its own, as a terminal's foreground job
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None and parent.stdin is not None
        worker = parent.stdout.readline().strip()
        assert worker.isdigit(), parent.communicate(timeout=30)
        os.killpg(parent.pid, signal.SIGINT)  # Ctrl-C: the terminal signals its whole group
        out, err = parent.communicate("next upload\n", timeout=60)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert parent.returncode == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip() == "parent: SIGINT"
    assert out.split() == [worker]  # the same worker served the next upload
