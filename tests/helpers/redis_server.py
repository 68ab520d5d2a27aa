"""A real Redis server for tests: Debian's ``redis-server``, started on a free port of 127.0.0.1
with its files in a temporary directory and nothing saved; ``make test`` installs the package
where it is missing."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from tests.helpers.ports import free_port
from tests.helpers.processes import installed

REDIS_SERVER = "redis-server"


def redis_server_path() -> str | None:
    """The ``redis-server`` binary, or None where it is not installed."""
    return installed(REDIS_SERVER)


@contextmanager
def redis_serving(workdir: Path) -> Iterator[str]:
    """A Redis server running for the block: its URL, ``redis://127.0.0.1:PORT/0``."""
    binary = redis_server_path()
    assert binary is not None, "redis-server is not installed (make test installs it)"
    port = free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir)]
    args += ["--save", "", "--appendonly", "no", "--protected-mode", "yes"]
    log = (workdir / "redis.log").open("wb")
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url, socket_timeout=1)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert process.poll() is None, (workdir / "redis.log").read_text()
                assert time.monotonic() < deadline, "redis-server did not answer PING"
                time.sleep(0.05)
        client.close()
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)
        log.close()
