"""Documents prepared (parsed, chunked, embedded) in worker processes, killed at their limits.

A hostile upload (a paragraph bomb, a document that inflates to a gigabyte) must not cost the
serving process its memory, its event loop or its shutdown (issue 24 §2). ``IngestWorkers``
runs ``retrieval.ingest.prepared.prepare_documents`` in a process of its own (a fresh
interpreter running this module, talking over a socket pair in ``multiprocessing``'s pickled
messages), and watches it while it works:

- a file whose parsing runs longer than ``max_parse_s`` gets its worker killed, and
  ``LimitExceeded`` (``max_parse_s``, 422) names the file;
- a worker whose resident memory passes ``max_memory_mb`` is killed: ``LimitExceeded``
  (``max_memory_mb``, 413);
- a caller that is cancelled (its client went away, the server is shutting down) kills it.

Workers run at a lower CPU priority (``NICENESS``) than the serving process, and in a process
group of their own, ignoring SIGINT: a Ctrl-C in the terminal is the server's to handle (it
stops them), never a ``KeyboardInterrupt`` traceback from a worker waiting for its next job.

At most ``max_workers`` work at once (others wait their turn); one idle worker is kept, its
embedding model loaded, for the next upload. The caller publishes the result
(``retrieval.ingest.prepared.publish_prepared``): only that step holds the collection's lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from retrieval.embedding.embedder import Embedder
from retrieval.errors import LimitExceeded, RetrievalError
from retrieval.formats import ParseLimits
from retrieval.ingest.files import DocumentReader
from retrieval.ingest.prepared import PreparedDocuments, default_token_counter, prepare_documents

#: How often a working worker is checked (its time on a file, its memory).
WATCH_S = 0.05
#: A worker's CPU priority below the serving process's: an upload's parsing and embedding take
#: the cores the answers leave.
NICENESS = 10
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True)
class PrepareJob:
    """What a worker is sent: the documents, the collection's known hashes, how to read them,
    and the embedder (pickled unloaded; the worker loads it once and keeps it)."""

    documents: Sequence[tuple[str, bytes]]
    known: Mapping[str, str]
    embedder: Embedder
    chunk_tokens: int
    overlap_tokens: int
    limits: ParseLimits


class WorkerFailed(RetrievalError):
    """A worker died or failed for a reason of its own (not a limit): the message says why."""


def _serve(conn: Connection) -> None:
    """A worker's life: prepare each job received, send back what came of it, until the
    parent closes the pipe. Messages: ("file", source) when a file's parsing begins, ("file",
    None) when embedding begins, then ("done", PreparedDocuments), ("limit", found, limit,
    value, unit) or ("error", message)."""
    embedders: dict[tuple[str, str, str], Embedder] = {}
    while True:
        try:
            job: PrepareJob = conn.recv()
        except EOFError:
            return
        key = (type(job.embedder).__qualname__, job.embedder.model_name, job.embedder.backend)
        embedder = embedders.setdefault(key, job.embedder)
        try:
            reader = DocumentReader(
                default_token_counter(embedder),
                chunk_tokens=job.chunk_tokens,
                overlap_tokens=job.overlap_tokens,
                limits=job.limits,
            )
            prepared = prepare_documents(
                job.documents,
                known=job.known,
                embedder=embedder,
                reader=reader,
                on_file=lambda source: conn.send(("file", source)),
            )
        except LimitExceeded as exc:
            conn.send(("limit", exc.found, exc.limit, exc.value, exc.unit))
        except Exception as exc:  # reported, not fatal: the worker serves the next job
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        else:
            conn.send(("done", prepared))


class _Worker:
    """One worker process (``python -m retrieval.ingest.workers FD``: a fresh interpreter, so
    no script's ``__main__`` is run again in it) and the parent's end of its socket."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "retrieval.ingest.workers", str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env=env,
            process_group=0,  # out of the terminal's foreground group: Ctrl-C is not its own
        )
        theirs.close()
        self.conn = Connection(mine.detach())

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def rss_bytes(self) -> int:
        """Its resident memory now (0 where ``/proc`` does not say)."""
        try:
            with open(f"/proc/{self.process.pid}/statm", "rb") as statm:
                return int(statm.read().split()[1]) * _PAGE_BYTES
        except (OSError, IndexError, ValueError):
            return 0

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        self.conn.close()


class IngestWorkers:
    """Worker processes that prepare uploaded documents, each watched and killed at its limits
    (``max_parse_s`` a file, ``max_memory_mb`` resident); ``max_workers`` at once."""

    def __init__(
        self, *, max_workers: int = 2, max_parse_s: float = 60.0, max_memory_mb: int = 2048
    ) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self.max_parse_s = max_parse_s
        self.max_memory_mb = max_memory_mb
        self._turns = asyncio.Semaphore(max_workers)
        self._idle: _Worker | None = None
        self._working: set[_Worker] = set()
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """The process ids of the workers alive now, working or idle."""
        workers = [*self._working, *([self._idle] if self._idle is not None else [])]
        return [w.process.pid for w in workers if w.alive]

    async def prepare(self, job: PrepareJob) -> PreparedDocuments:
        """``job`` prepared by a worker; ``LimitExceeded`` when a file or the worker passed a
        limit, ``WorkerFailed`` when the worker failed otherwise."""
        async with self._turns:
            if self._closed:
                raise WorkerFailed("the ingest workers are closed: the server is stopping")
            worker, self._idle = self._idle, None
            if worker is None or not worker.alive:
                worker = await asyncio.to_thread(_Worker)
            kept = False
            self._working.add(worker)
            try:
                prepared = await self._run(worker, job)
                kept = self._idle is None and not self._closed
                return prepared
            finally:
                self._working.discard(worker)
                if kept:
                    self._idle = worker
                else:
                    worker.kill()

    async def _run(self, worker: _Worker, job: PrepareJob) -> PreparedDocuments:
        await asyncio.to_thread(worker.conn.send, job)
        source: str | None = None
        since = time.monotonic()
        while True:
            message = await self._next_message(worker, source, since)
            kind = message[0]
            if kind == "file":
                source, since = message[1], time.monotonic()
                continue
            if kind == "done":
                prepared: PreparedDocuments = message[1]
                return prepared
            if kind == "limit":
                _, found, limit, value, unit = message
                raise LimitExceeded(found, limit=limit, value=value, unit=unit)
            raise WorkerFailed(str(message[1]))

    async def _next_message(self, worker: _Worker, source: str | None, since: float) -> Any:
        """The worker's next message, read on a thread while the worker is watched."""
        receiving = asyncio.ensure_future(asyncio.to_thread(_receive, worker.conn))
        try:
            while True:
                done, _ = await asyncio.wait({receiving}, timeout=WATCH_S)
                if done:
                    return receiving.result()
                if source is not None and time.monotonic() - since > self.max_parse_s:
                    worker.kill()
                    raise LimitExceeded(
                        f"{source}: parsing it",
                        limit="max_parse_s",
                        value=int(self.max_parse_s),
                        unit="s",
                        status_code=422,
                    )
                if worker.rss_bytes() > self.max_memory_mb * 1024 * 1024:
                    worker.kill()
                    what = f"{source}: parsing it" if source is not None else "embedding"
                    raise LimitExceeded(
                        f"the ingest worker's memory while {what}",
                        limit="max_memory_mb",
                        value=self.max_memory_mb,
                        unit="MB",
                    )
        finally:
            if not receiving.done():  # cancelled, or over a limit: the worker is no more
                worker.kill()
                with contextlib.suppress(BaseException):
                    await receiving

    def close(self) -> None:
        """Kill the idle worker; a working one is killed by its caller's cancellation."""
        self._closed = True
        worker, self._idle = self._idle, None
        if worker is not None:
            worker.kill()


def _receive(conn: Connection) -> Any:
    try:
        return conn.recv()
    except (EOFError, OSError) as exc:
        return ("error", f"the ingest worker died ({type(exc).__name__})")


def _exit_with_parent(parent: int) -> None:
    """End this worker when the process that started it is gone (killed, say)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # its parent ends it (a SIGINT sent to it too)
    os.nice(NICENESS)  # questions being answered come first
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    _serve(Connection(int(sys.argv[1])))
