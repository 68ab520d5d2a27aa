"""Run ``ragtime`` as real processes embedding with the hash embedder (``hash_cli``): ingest
(optionally killed at a chosen point) and serve, over one data dir."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def cli_env(data_dir: Path, **settings: str) -> dict[str, str]:
    """The environment of a ``hash_cli`` process over ``data_dir``, with ``RAGTIME_*``
    ``settings`` (``snapshot_poll_s="0.2"`` -> ``RAGTIME_SNAPSHOT_POLL_S``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTIME_")}
    env |= {"PYTHONPATH": str(ROOT), "RAGTIME_DATA_DIR": str(data_dir)}
    # One process: the hash embedder is patched into this one only (a second would load MiniLM).
    env |= {"RAGTIME_GENERATION_BACKEND": "null", "RAGTIME_WORKERS": "1"}
    env |= {f"RAGTIME_{name.upper()}": value for name, value in settings.items()}
    env.pop("CRASH_AT", None)
    return env


def run_ingest(
    data_dir: Path, path: Path, *args: str, crash_at: str = "", timeout_s: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """``ragtime ingest PATH ARGS`` as a process; ``crash_at`` arms ``hash_cli``'s SIGKILL."""
    env = cli_env(data_dir) | ({"CRASH_AT": crash_at} if crash_at else {})
    return subprocess.run(
        [sys.executable, "-m", "tests.helpers.hash_cli", "ingest", str(path), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def start_ingest(data_dir: Path, path: Path, *args: str) -> subprocess.Popen[str]:
    """``ragtime ingest PATH ARGS`` started as a process (its output piped)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.hash_cli", "ingest", str(path), *args],
        env=cli_env(data_dir),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start_server(data_dir: Path, port: int, **settings: str) -> subprocess.Popen[bytes]:
    """``ragtime serve --port PORT`` as a process (null generation backend)."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.helpers.hash_cli",
            "serve",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        env=cli_env(data_dir, **settings),
        cwd=ROOT,
    )


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited while starting"
        try:
            if httpx.get(f"{url}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise AssertionError("the server did not become ready")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
