"""Where and how ``ragtime serve`` runs: the data directory, the address, the processes, the
bounds of one request and the shutdown's grace."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field

#: ``RAGTIME_WORKERS=auto`` starts at most this many processes (each loads its own models).
AUTO_WORKERS_MAX = 4


def usable_cores(cgroup_root: Path = Path("/sys/fs/cgroup")) -> int:
    """The CPUs this process may run on: those it is pinned to, fewer where its cgroup's CPU
    quota (cgroup v2's ``cpu.max``, a container's ``--cpus``) allows less time than that."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1
    quota = cgroup_cpu_quota(cgroup_root)
    return max(1, min(cores, math.ceil(quota))) if quota is not None else cores


def cgroup_cpu_quota(
    root: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")
) -> float | None:
    """The CPUs' worth of time this process's cgroup and those above it may use (the least
    ``quota / period`` of their ``cpu.max``), or None: no quota, or no cgroup v2 to read.
    ``membership`` is the file that names the process's cgroup."""
    try:
        line = membership.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    if not line.startswith("0::"):
        return None  # cgroup v1: not read
    least: float | None = None
    group = root / line.removeprefix("0::").strip().lstrip("/")
    for folder in (group, *group.parents):
        try:
            quota, period = (folder / "cpu.max").read_text().split()
        except (OSError, ValueError):
            quota = "max"
        if quota != "max" and float(period) > 0:
            share = float(quota) / float(period)
            least = share if least is None else min(least, share)
        if folder == root:
            break
    return least


class ServeSettings(BaseModel):
    """The server: what it keeps where, what it listens on, how many processes, what one request
    may be, and how long a stop lets requests finish."""

    data_dir: Path = Field(Path(".ragtime"), description="Index, chunk store and API keys.")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    workers: Annotated[int, Field(ge=1, le=64)] | Literal["auto"] = Field(
        "auto",
        description="Server processes behind the one port; each holds its own models, stages "
        "and cost model, and admits what it can finish itself. auto: one per core (at most "
        f"{AUTO_WORKERS_MAX}), or one where more would not serve more: on the in-process "
        "llama.cpp backend (each process would run its own model on the same cores), or with "
        "per-key rate limits kept in process (each process would grant a key its whole rate).",
    )
    serve_reuse_port: bool = Field(
        True,
        description="With several `ragtime serve` processes, each listens on a socket of its "
        "own and the kernel spreads connections across them (SO_REUSEPORT, Linux; "
        "app.frontdoor.listeners). Off: all share one socket, and whichever process wakes first "
        "takes a whole burst.",
    )
    gc_freeze: bool = Field(
        True,
        description="Once `ragtime serve` has started, freeze the objects then alive out of "
        "the garbage collector's full passes (app.frontdoor.heap): a full pass then takes "
        "milliseconds, not the 65-110 ms that stalled the event loop in a burst.",
    )
    default_collection: str = Field("demo", min_length=1)
    question_max_chars: int = Field(2000, ge=1)
    max_body_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="Largest request body of a question route; larger ones are refused (413).",
    )
    shutdown_grace_s: float = Field(
        10.0,
        ge=0,
        description="On SIGTERM, how long requests in flight may run on (new ones get 503 "
        "`shutting_down`); then a stream ends with an `error` event, a request not yet answered "
        "gets the 503, and the process exits within 2 s.",
    )

    # What lives in the data directory.
    @property
    def keys_path(self) -> Path:
        return self.data_dir / "keys.sqlite3"

    @property
    def store_path(self) -> Path:
        return self.data_dir / "store"

    @property
    def demo_key_path(self) -> Path:
        return self.data_dir / "demo-api-key"
