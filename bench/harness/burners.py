"""CPU-bound neighbours for benches: processes that spin at normal priority while a block runs,
as a browser or a build would beside the service (``ragtime bench neighbours``, ``ragtime bench
recovery``, ``bench.studies.llamacpp_threads``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

SPIN = "while True: pass"


@contextmanager
def burners(count: int) -> Iterator[None]:
    """``count`` processes spinning on the CPU while the block runs; killed when it ends."""
    spinning = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(count)]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
            process.wait()
