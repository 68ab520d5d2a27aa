"""Servers under test, always in their own processes: ragtime from a config file, a floor, or
the Haystack peer.

A config file holds ``RAGTIME_*`` variables (any other environment variable passes through too),
either ``.env``-style (``KEY=VALUE`` lines, ``#`` comments, optional quotes) or as a JSON object.
``ServerProcess`` starts the command with that environment on a free port of 127.0.0.1, waits
until ``/readyz`` answers 200, and stops it (SIGINT, then SIGKILL) when the bench is done.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx

from bench.harness.profile import Profiler

HOST = "127.0.0.1"


class ServerFailed(RuntimeError):
    """A server under test did not become ready; the message ends with its log's tail."""


def read_config(path: Path) -> dict[str, str]:
    """The variables of a ``.env``-style or JSON config file."""
    text = path.read_text()
    if path.suffix == ".json" or text.lstrip().startswith("{"):
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a JSON config must be an object of variables")
        return {str(k): _json_value(v) for k, v in data.items()}
    values: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        line = line.removeprefix("export ").strip()
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{path}:{number}: expected KEY=VALUE, got {raw!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[key.strip()] = value
    return values


def _json_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def config_key(config: dict[str, str]) -> str | None:
    """The API key a config's server accepts: ``RAGTIME_API_KEY``, or its demo key file."""
    if config.get("RAGTIME_API_KEY"):
        return config["RAGTIME_API_KEY"]
    data_dir = Path(
        config.get("RAGTIME_DATA_DIR") or os.environ.get("RAGTIME_DATA_DIR", ".ragtime")
    )
    key_file = data_dir / "demo-api-key"
    return key_file.read_text().strip() if key_file.is_file() else None


class ServerProcess:
    """One server under test, as a context manager: ``with ServerProcess(...) as server:``."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        *,
        port: int,
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
        ready_timeout_s: float = 300.0,
        profile_path: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.port = port
        self.env = env or {}
        self.log_path = log_path
        self.ready_timeout_s = ready_timeout_s
        self.url = f"http://{HOST}:{port}"
        self.profile_path = profile_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: int | None = None
        self._profiler: Profiler | None = None

    def start(self) -> None:
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **self.env}
        if self.log_path is None:
            self.log_path = Path(f"/tmp/ragtime-bench-{self.name}-{self.port}.log")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._process = subprocess.Popen(
            self.argv, env=env, stdout=self._log_file, stderr=subprocess.STDOUT
        )
        self._wait_ready()
        if self.profile_path is not None:
            self._profiler = Profiler(self._process.pid, self.profile_path)

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        last = "no answer yet"
        with httpx.Client(timeout=5.0) as client:
            while time.monotonic() < deadline:
                assert self._process is not None
                if self._process.poll() is not None:
                    self._fail(f"exited with status {self._process.returncode}")
                try:
                    response = client.get(f"{self.url}/readyz")
                    if response.status_code == 200:
                        return
                    last = f"{response.status_code}: {response.text[:500]}"
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                time.sleep(0.2)
        self._fail(f"not ready after {self.ready_timeout_s:g} s ({last})")

    def _fail(self, why: str) -> None:
        self.stop()
        tail = ""
        if self.log_path is not None and self.log_path.exists():
            tail = "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])
        raise ServerFailed(f"server {self.name!r} {why}; log {self.log_path}:\n{tail}")

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs (its workers are that process's children)."""
        return self._process.pid if self._process is not None else None

    def stop(self) -> None:
        profiler, self._profiler = self._profiler, None
        if profiler is not None:
            profiler.stop()
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log_file is not None:
            os.close(self._log_file)
            self._log_file = None

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def ragtime_server(
    name: str,
    config: dict[str, str],
    *,
    log_dir: Path | None = None,
    profile_dir: Path | None = None,
) -> ServerProcess:
    """``ragtime serve`` with ``config`` in its environment, on a free port; with
    ``profile_dir``, py-spy samples it into ``<profile_dir>/<name>.txt`` while it serves."""
    port = free_port()
    argv = [sys.executable, "-m", "app.cli.commands", "serve", "--host", HOST, "--port", str(port)]
    argv += ["--log-level", "warning"]
    log_path = log_dir / f"{name}.log" if log_dir else None
    profile_path = profile_dir / f"{name}.txt" if profile_dir else None
    return ServerProcess(
        name, argv, port=port, env=config, log_path=log_path, profile_path=profile_path
    )


def floor_server(
    tokens: int,
    *,
    name: str = "floor",
    log_dir: Path | None = None,
    same_work: Path | None = None,
    workers: int = 1,
) -> ServerProcess:
    """A floor (``bench.harness.floor``) on a free port: the bare FastAPI/uvicorn streaming
    endpoint, or with ``same_work`` (a data dir) the same-work floor over its collection, from
    ``workers`` processes."""
    port = free_port()
    # The bare floor never imports ``app``: that process holds the bare stack only.
    argv = [
        sys.executable,
        "-m",
        "bench.harness.floor",
        "--port",
        str(port),
        "--tokens",
        str(tokens),
        "--workers",
        str(workers),
    ]
    if same_work is not None:
        argv += ["--same-work", str(same_work)]
    log_path = log_dir / f"{name}.log" if log_dir else None
    return ServerProcess(name, argv, port=port, log_path=log_path, ready_timeout_s=120.0)


def peer_server(
    python: str,
    *,
    generator: str,
    tokens: int,
    name: str = "haystack",
    index_cache: Path | None = None,
    log_dir: Path | None = None,
) -> ServerProcess:
    """The Haystack peer (``bench.peers.haystack_app``) run by ``python`` (an interpreter with
    the ``bench-peers`` extra), on a free port; its index kept in ``index_cache`` when given
    (the first start embeds the demo corpus: minutes on 2 shared cores)."""
    port = free_port()
    argv = [python, "-m", "bench.peers.haystack_app", "--port", str(port)]
    argv += ["--generator", generator, "--tokens", str(tokens)]
    if index_cache is not None:
        argv += ["--index-cache", str(index_cache)]
    log_path = log_dir / f"{name}.log" if log_dir else None
    # The checkout's ``bench`` package, whichever interpreter (and cwd) runs it.
    from bench.harness.paths import REPO

    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    return ServerProcess(name, argv, port=port, env=env, log_path=log_path, ready_timeout_s=900.0)
