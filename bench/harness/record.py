"""A run's record: the machine and versions it ran on, its command line, its JSON files."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bench.harness.paths import REPO
from bench.harness.results import BenchResult

PACKAGES = (
    "ragtime",
    "fastapi",
    "starlette",
    "uvicorn",
    "sse-starlette",
    "httpx",
    "pydantic",
    "numpy",
    "torch",
    "sentence-transformers",
    "faiss-cpu",
    "llama-cpp-python",
    "opentelemetry-sdk",
    "matplotlib",
)


def machine_info() -> dict[str, Any]:
    """Cores, CPU model, memory, OS and the load average when the run began."""
    info: dict[str, Any] = {
        "cores": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                info["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
    if hasattr(os, "getloadavg"):
        info["loadavg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    return info


def _cpu_model() -> str:
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    out["commit"] = _git_commit()
    return out


def _git_commit() -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=5,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def command_line(argv: Sequence[str]) -> str:
    return "ragtime " + shlex.join(argv)


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def write_json(result: BaseModel, path: Path) -> None:
    """Any bench result as indented JSON, its folder made if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.model_dump_json(indent=1) + "\n")


def write_figures(figures: Mapping[str, Any], path: Path) -> None:
    """A bench's figures (plain JSON values) as indented JSON, its folder made if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(figures, indent=2) + "\n")


def read_json(path: Path) -> BenchResult:
    return BenchResult.model_validate_json(path.read_text())
