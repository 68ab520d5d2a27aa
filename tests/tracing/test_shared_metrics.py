"""The metrics of a server of several processes, read from their shared directory."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest, multiprocess

from tracing import metrics

pytestmark = pytest.mark.process

#: A process of the server: records a request in the shared directory, as a worker does.
WORKER = """
from prometheus_client import Counter
Counter("ragtime_test_requests_total", "requests", registry=None).inc(3)
"""


def _worker_wrote(path: Path) -> None:
    env = {"PROMETHEUS_MULTIPROC_DIR": str(path), "PATH": ""}
    subprocess.run([sys.executable, "-c", WORKER], env=env, check=True, timeout=60)


def test_a_process_file_still_being_made_does_not_fail_the_collection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prometheus_client creates a process's file before it sizes it: read in that moment, at
    0 bytes, it failed the whole collection, and with it a starting process's first alert
    reading, which stopped the server. It is read as a file with nothing recorded yet."""
    _worker_wrote(tmp_path)
    (tmp_path / "counter_4242.db").touch()  # another process's, not yet sized
    monkeypatch.setenv(metrics.MULTIPROC_DIR_ENV, str(tmp_path))

    text = generate_latest(metrics.scrape_registry()).decode()

    assert "ragtime_test_requests_total 3.0" in text


def test_prometheus_client_still_fails_on_such_a_file(tmp_path: Path) -> None:
    """Why ``SharedFilesCollector`` exists (prometheus/client_python#1199). Should this fail
    after an upgrade, upstream reads such a file itself and the subclass can go."""
    _worker_wrote(tmp_path)
    (tmp_path / "counter_4242.db").touch()
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(tmp_path))

    with pytest.raises(struct.error):
        generate_latest(registry)
