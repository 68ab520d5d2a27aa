"""SGLang's real gateway for tests: the Rust binary from PyPI, started as a process of its own on
free ports of 127.0.0.1, in front of the workers a test gives it (simulated SGLang servers).

Two releases are pinned in the ``dev`` extra, and tests run against both: they differ in routes
and shapes, and users run either.

- ``sglang-router`` 0.3.2 (``python -m sglang_router.launch_router``): ``/get_loads`` lists
  ``{"worker", "load"}`` with -1 for a 0.5.23 worker, ``/get_server_info`` describes the router,
  ``/engine_metrics`` renames ``sglang:`` to ``sglang_``; ``/generate`` with no worker: 503
  ``no_available_workers``.
- ``smg`` 1.13.0 (``python -m smg launch``), the gateway's newer home: ``/get_loads`` lists each
  worker's load entries, ``/get_server_info`` is its first worker's, ``/workers`` labels each
  worker with its context length and batch; ``/generate`` with no worker: 404
  ``model_not_found``.

Health checks run every second and one check decides, so that a worker that goes or comes is
seen within a test's patience (the defaults are 60 s and 3 checks).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.helpers.ports import free_port
from tests.helpers.processes import ServerProcess, stop, wait_answering

#: Each pinned release, by its PyPI name: how it is launched.
RELEASES: dict[str, list[str]] = {
    "sglang-router": [sys.executable, "-m", "sglang_router.launch_router"],
    "smg": [sys.executable, "-m", "smg", "launch"],
}


@dataclass
class Gateway(ServerProcess):
    """A running gateway: its URL, its release, and its log file."""

    release: str = field(kw_only=True)

    def workers(self) -> list[dict[str, Any]]:
        body = httpx.get(self.url + "/workers", timeout=5).json()
        return [w for w in body.get("workers", []) if isinstance(w, dict)]

    def add_worker(self, url: str) -> None:
        """Register ``url`` (both releases take ``POST /workers``; it is queued: 202)."""
        response = httpx.post(self.url + "/workers", json={"url": url}, timeout=5)
        assert response.status_code in (200, 201, 202), response.text

    def remove_worker(self, url: str, timeout_s: float = 30.0) -> None:
        """Deregister ``url`` (``DELETE /workers/{id}``, queued: 202), and wait until the
        gateway no longer lists it."""
        (worker,) = [w for w in self.workers() if w.get("url") == url]
        response = httpx.delete(f"{self.url}/workers/{worker['id']}", timeout=5)
        assert response.status_code in (200, 202, 204), response.text
        deadline = time.monotonic() + timeout_s
        while any(w.get("url") == url for w in self.workers()):
            assert time.monotonic() < deadline, f"{self.release} still lists {url}"
            time.sleep(0.1)

    def wait_workers(self, healthy: int, timeout_s: float = 30.0) -> None:
        """Until ``/readiness`` counts ``healthy`` healthy workers (0: it answers 503)."""
        deadline = time.monotonic() + timeout_s
        while True:
            response = httpx.get(self.url + "/readiness", timeout=5)
            body = response.json() if response.status_code == 200 else {}
            count = body.get("healthy_workers", 0) if isinstance(body, dict) else 0
            if count == healthy and (healthy > 0) == (response.status_code == 200):
                return
            assert self.process.poll() is None, self.log_tail()
            assert time.monotonic() < deadline, (
                f"{self.release}: {healthy} healthy worker(s) expected, /readiness answered "
                f"{response.status_code} {response.text[:300]}\n{self.log_tail()}"
            )
            time.sleep(0.1)


@contextmanager
def sglang_gateway(release: str, workers: Sequence[str], *, log_dir: Path) -> Iterator[Gateway]:
    """The gateway of ``release`` in front of ``workers`` (maybe none), ready for the block:
    every worker registered and healthy. Stopped (SIGTERM, then SIGKILL) on exit."""
    port, metrics_port = free_port(), free_port()
    argv = [*RELEASES[release], "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--policy", "cache_aware", "--log-level", "warn"]
    argv += ["--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics_port)]
    argv += ["--health-check-interval-secs", "1", "--health-failure-threshold", "1"]
    argv += ["--health-success-threshold", "1", "--worker-startup-timeout-secs", "30"]
    argv += ["--shutdown-grace-period-secs", "1", "--worker-startup-check-interval", "1"]
    if release == "smg":
        argv += ["--load-monitor-interval", "1"]
    if workers:
        argv += ["--worker-urls", *workers]
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{release}-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    gateway = Gateway(f"http://127.0.0.1:{port}", log, process, release=release)
    try:
        wait_answering(gateway.url + "/liveness", process, gateway.log_tail, what=release)
        gateway.wait_workers(len(workers))
        yield gateway
    finally:
        stop(process)
