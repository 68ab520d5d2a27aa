"""A server's CPU profile during a bench run: py-spy's samples, and their top functions.

``ragtime bench load --profile DIR`` attaches ``py-spy record --format raw`` to each server it
starts, once the server is ready, and stops it before the server (``ServerProcess``). The raw
format is one line per distinct stack, ``frame;frame;...;frame count``, outermost first, each
frame ``function (file:line)``. ``top_functions`` reads it back: the share of samples in which a
function is on the stack (inclusive) and at its top (self), so that BENCHMARKS.md can say where
the time of a row that misses its target goes.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

#: The frame's function and file, without the line: one entry per function.
_FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^():]*)(?::\d+)?\)$")
#: Our own packages: inclusive shares are reported for these only (library frames are many).
OWN_PACKAGES = ("app", "retrieval", "inference", "tracing")


def py_spy() -> str | None:
    """The py-spy executable beside this Python, else on the PATH."""
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.is_file() else shutil.which("py-spy")


def has_children(pid: int) -> bool:
    """Whether ``pid`` has child processes (Linux's ``/proc``; ``False`` where it cannot tell)."""
    try:
        return any(
            task.joinpath("children").read_text().split()
            for task in Path(f"/proc/{pid}/task").iterdir()
        )
    except OSError:
        return False


class Profiler:
    """``py-spy record`` attached to one process, and to its children when it has some (a
    server of several processes), until ``stop``; the samples go to ``path``."""

    def __init__(self, pid: int, path: Path, *, rate: int = 200) -> None:
        self.path = path
        executable = py_spy()
        if executable is None:
            raise RuntimeError("--profile needs py-spy (pip install '.[bench]')")
        path.parent.mkdir(parents=True, exist_ok=True)
        argv = [executable, "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate)]
        argv += ["--output", str(path), "--nonblocking"]
        if has_children(pid):
            argv.append("--subprocesses")
        self._process = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )

    def stop(self) -> None:
        """Stop sampling; py-spy writes its file on SIGINT."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


@dataclass(frozen=True)
class FunctionShare:
    function: str  # "name (file)"
    inclusive: float  # share of samples with the function anywhere on the stack
    self_share: float  # share of samples with the function at the top


def _function(frame: str) -> str:
    match = _FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    return f"{match['function']} ({match['file']})"


def _own(function: str) -> bool:
    file = function.rsplit("(", 1)[-1].rstrip(")")
    return file.split("/", 1)[0] in OWN_PACKAGES or any(
        f"/{package}/" in file for package in OWN_PACKAGES
    )


def read_samples(path: Path) -> list[tuple[list[str], int]]:
    """Each distinct stack (functions, outermost first) with its sample count."""
    stacks = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        stacks.append(([_function(f) for f in stack.split(";")], int(count)))
    return stacks


def top_functions(path: Path, *, limit: int = 8) -> tuple[int, list[FunctionShare]]:
    """The samples in ``path`` and its functions ranked: ours by inclusive share, then the
    top self-time functions of any package (those not already listed)."""
    stacks = read_samples(path)
    total = sum(count for _, count in stacks)
    if total == 0:
        return 0, []
    inclusive: Counter[str] = Counter()
    own_self: Counter[str] = Counter()
    for functions, count in stacks:
        for function in set(functions):
            inclusive[function] += count
        own_self[functions[-1]] += count
    ours = [f for f, _ in inclusive.most_common() if _own(f)][:limit]
    hottest = [f for f, _ in own_self.most_common() if f not in ours][:limit]
    return total, [
        FunctionShare(f, inclusive[f] / total, own_self[f] / total) for f in ours + hottest
    ]


def profile_table(path: Path, *, limit: int = 8) -> str:
    """A Markdown table of ``top_functions``, with the sample count; a line when empty."""
    total, shares = top_functions(path, limit=limit)
    if total == 0:
        return f"(no samples in {path})"
    rows = [
        f"py-spy, {total} samples of the server's threads while busy (`{path}`).",
        "",
        "| function | on the stack | at the top |",
        "| --- | --- | --- |",
    ]
    rows += [f"| `{s.function}` | {s.inclusive:.1%} | {s.self_share:.1%} |" for s in shares]
    return "\n".join(rows)
