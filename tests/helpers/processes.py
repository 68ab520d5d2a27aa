"""Run ``ragtime`` as real processes embedding with the hash embedder (``hash_cli``): ingest
(optionally killed at a chosen point) and serve, over one data dir; and what the tests' other
real servers share: finding a Debian package's binary (``installed``), a running server with its
log (``ServerProcess``), waiting for it to answer and stopping it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]


def installed(*names: str) -> str | None:
    """The first of ``names`` found on PATH or in /usr/bin (where Debian's packages put them,
    off a minimal PATH), or None where none is installed."""
    for name in names:
        found = shutil.which(name) or shutil.which(name, path="/usr/bin")
        if found:
            return found
    return None


@dataclass
class ServerProcess:
    """A server a test started: its URL, its process and the file its output goes to."""

    url: str
    log: Path
    process: subprocess.Popen[bytes]

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def cli_env(data_dir: Path, **settings: str) -> dict[str, str]:
    """The environment of a ``hash_cli`` process over ``data_dir``, with ``RAGTIME_*``
    ``settings`` (``snapshot_poll_s="0.2"`` -> ``RAGTIME_SNAPSHOT_POLL_S``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGTIME_")}
    env |= {"PYTHONPATH": str(ROOT), "RAGTIME_DATA_DIR": str(data_dir)}
    # One process: the hash embedder is patched into this one only (a second would load MiniLM).
    env |= {"RAGTIME_GENERATION_BACKEND": "null", "RAGTIME_WORKERS": "1"}
    # The model writes every answer, and none abstains: the threshold is calibrated for MiniLM,
    # not the hash embedder (``tests.helpers.app.make_settings`` says the same).
    env |= {"RAGTIME_ANSWER_MODE": "generate", "RAGTIME_ANSWERABLE_MIN_SIMILARITY": "-1"}
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


def start_server_on_sglang(
    data_dir: Path, port: int, endpoint: str, tokenizer: Path, **settings: str
) -> subprocess.Popen[bytes]:
    """``start_server`` generating through the SGLang server (or gateway) at ``endpoint``,
    serving the simulated model with ``tokenizer`` (``build_tiny_tokenizer``), its load polled
    every half second."""
    return start_server(
        data_dir,
        port,
        generation_backend="sglang",
        sglang_endpoints=json.dumps([endpoint]),
        served_model="fake/tiny-chat",
        served_tokenizer=str(tokenizer),
        remote_poll_interval_s="0.5",
        **settings,
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


def wait_answering(
    url: str,
    proc: subprocess.Popen[Any],
    log_tail: Callable[[], str],
    *,
    what: str,
    timeout_s: float = 60.0,
) -> None:
    """Wait until ``GET url`` answers 200 from the program ``proc`` runs (``what``), failing
    with its log's tail when it exits or takes longer than ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None, f"{what} exited:\n{log_tail()}"
        assert time.monotonic() < deadline, f"{what} did not start:\n{log_tail()}"
        time.sleep(0.1)


def stop(proc: subprocess.Popen[Any]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
