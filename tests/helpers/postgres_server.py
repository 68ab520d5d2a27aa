"""A real PostgreSQL server for tests: Debian's ``postgresql``, a fresh cluster made by
``initdb`` in a temporary directory and started by ``pg_ctl`` on a free port of 127.0.0.1, as
the user ``postgres`` when the tests run as root (PostgreSQL refuses to run as root); ``make
test`` installs the package where it is missing."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.ports import free_port

SERVICE_USER = "postgres"


def postgres_bin() -> Path | None:
    """The directory of Debian's PostgreSQL binaries (the newest), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).resolve().parent if on_path else None


def _as_server_user(args: list[str]) -> list[str]:
    return ["runuser", "-u", SERVICE_USER, "--", *args] if os.geteuid() == 0 else args


@contextmanager
def postgres_serving() -> Iterator[str]:
    """A PostgreSQL server running for the block: its URL (user ``postgres``, trust auth)."""
    binaries = postgres_bin()
    assert binaries is not None, "PostgreSQL is not installed (make test installs it)"
    # Not under pytest's tmp_path: root's is closed to the server's user.
    root = Path(tempfile.mkdtemp(prefix="ragtime-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, SERVICE_USER)
    data, log = root / "data", root / "server.log"
    port = free_port()
    initdb = [str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    start = [str(binaries / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options]
    try:
        for args in (
            [*initdb, "--no-sync", "--encoding=UTF8"],
            [*start, "-w", "-t", "60", "start"],
        ):
            done = subprocess.run(_as_server_user(args), capture_output=True, timeout=120)
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            stop = [str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
            subprocess.run(_as_server_user(stop), capture_output=True, timeout=60)
    finally:
        shutil.rmtree(root, ignore_errors=True)
