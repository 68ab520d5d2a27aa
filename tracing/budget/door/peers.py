"""What the processes of one ``ragtime serve`` have learned of their own work, shared through
files, so that a process that has served nothing yet starts from its siblings' figures rather
than from a constant prior.

``ragtime serve`` on several processes spreads connections across them
(``app.frontdoor.listeners``), and each process admits what it can finish itself (``admission``). A
client's first requests, one after another on one kept-alive connection, all reach one process: on
two cores, after four such questions, one process had learned 13 ms a request alone while its
sibling met its share of a 100-question burst on the 40 ms prior and refused a quarter of it
(docs/studies/bursts-and-admission.md, "Siblings' figures"). The machine is the same for both, so is
the work.

Each process writes what it has learned (``Learned``) to ``<dir>/<pid>.json``, written whole and
then renamed into place so that a reader never sees half a file (about 0.15 ms): at most every
``PUBLISH_S``, and at once for a route's first times alone learned while the process has no other
request (``FinishAdmission``). A process reads its siblings' at most every ``READ_S``, and only
while its own figures are few; the median over its siblings stands in for its prior.
``ragtime serve`` makes the directory for its processes and names it, with their number, in the
environment (``shared_dir``). Sharing is best effort: a file that cannot be written or read is
skipped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tracing.process_dirs import fresh_shared_dir

log = logging.getLogger(__name__)

#: The directory the processes of one server share their figures in.
PEERS_DIR_ENV = "RAGTIME_ADMISSION_PEERS_DIR"
#: How many processes serve beside each other (their cores are shared among them).
PROCESSES_ENV = "RAGTIME_SERVE_PROCESSES"
#: A process writes its figures at most this often.
PUBLISH_S = 0.25
#: A process reads its siblings' figures at most this often (and only while its own are few).
READ_S = 0.25


@dataclass(frozen=True)
class Learned:
    """A process's own work as learned from what it served: the time a request of each route
    takes alone, and the time a request adds when requests overlap (None: not yet learned)."""

    alone_ms: Mapping[str, float] = field(default_factory=dict)
    per_request_ms: float | None = None

    def as_dict(self) -> dict[str, object]:
        return {"alone_ms": dict(self.alone_ms), "per_request_ms": self.per_request_ms}

    def to_json(self) -> str:
        return json.dumps(self.as_dict())

    @classmethod
    def from_json(cls, text: str) -> Learned:
        raw = json.loads(text)
        alone = {str(route): float(ms) for route, ms in dict(raw.get("alone_ms") or {}).items()}
        per_request = raw.get("per_request_ms")
        return cls(alone, None if per_request is None else float(per_request))


def median_of(learned: list[Learned]) -> Learned:
    """The median of each figure over the processes that have learned it."""
    routes = {route for one in learned for route in one.alone_ms}
    alone = {
        route: median([one.alone_ms[route] for one in learned if route in one.alone_ms])
        for route in routes
    }
    per_request = [one.per_request_ms for one in learned if one.per_request_ms is not None]
    return Learned(alone, median(per_request) if per_request else None)


def median(values: list[float]) -> float:
    """The middle value (the upper of the two middle ones for an even count)."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


class Peers:
    """One process's side of the shared directory: it publishes its own figures and reads its
    siblings'."""

    def __init__(self, directory: Path, *, pid: int | None = None) -> None:
        self.directory = directory
        self.pid = os.getpid() if pid is None else pid
        self._published_at = -float("inf")
        self._read_at = -float("inf")
        self._siblings = Learned()

    @classmethod
    def from_environment(cls) -> Peers | None:
        """The peers of this process when ``ragtime serve`` started it among others, else
        None."""
        directory = os.environ.get(PEERS_DIR_ENV)
        return cls(Path(directory)) if directory else None

    @property
    def own_path(self) -> Path:
        return self.directory / f"{self.pid}.json"

    def due(self, *, now: float | None = None) -> bool:
        """Whether this process's figures are to be written now: the last write is older than
        ``PUBLISH_S`` (it counts as written from here)."""
        now = time.monotonic() if now is None else now
        if now - self._published_at < PUBLISH_S:
            return False
        self._published_at = now
        return True

    def publish(self, learned: Learned) -> bool:
        """Write ``learned`` for the siblings; whether it was written."""
        partial = self.directory / f".{self.pid}.json.partial"
        try:
            partial.write_text(learned.to_json())
            partial.replace(self.own_path)
        except OSError as exc:
            log.debug("could not share admission figures in %s: %s", self.directory, exc)
            return False
        return True

    def siblings(self, *, now: float | None = None) -> Learned:
        """The median of the siblings' figures, read again when the last read is older than
        ``READ_S``."""
        now = time.monotonic() if now is None else now
        if now - self._read_at >= READ_S:
            self._read_at = now
            self._siblings = median_of(list(self._read_siblings()))
        return self._siblings

    def _read_siblings(self) -> Iterator[Learned]:
        try:
            paths = [p for p in self.directory.glob("*.json") if p != self.own_path]
        except OSError:
            return
        for path in paths:
            try:
                yield Learned.from_json(path.read_text())
            except (OSError, ValueError, TypeError, AttributeError) as exc:
                log.debug("skipped the admission figures in %s: %s", path, exc)


@contextlib.contextmanager
def shared_dir(processes: int) -> Iterator[Path | None]:
    """For a server of ``processes`` processes started within the block (which inherit the
    environment): a fresh directory for their figures, named in ``PEERS_DIR_ENV`` with their
    number in ``PROCESSES_ENV``, removed after. One process needs none: ``None``."""
    if processes <= 1:
        yield None
        return
    also = {PROCESSES_ENV: str(processes)}
    with fresh_shared_dir("ragtime-admission-", PEERS_DIR_ENV, also) as path:
        yield path


def serving_processes() -> int:
    """How many processes serve beside this one, itself included (1 unless ``ragtime serve``
    said otherwise)."""
    try:
        return max(int(os.environ.get(PROCESSES_ENV, "1")), 1)
    except ValueError:
        return 1
