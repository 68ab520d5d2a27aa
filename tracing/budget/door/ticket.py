"""An admitted request's place in the book (``Ticket``), and why a request was not admitted
(``Refusal``): what the front door holds per request, and what it answers with."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol


class Book(Protocol):
    """What a ticket tells the book that issued it (``book.FinishAdmission``)."""

    lock: threading.RLock

    def account(self, now: float | None = None) -> int: ...

    def finish(self, ticket: Ticket, *, learn: bool = True, now: float | None = None) -> None: ...


@dataclass(eq=False)
class Ticket:
    """One admitted request's place: its deadline, and whether it is in its own work."""

    route: str
    arrived: float
    deadline: float
    ahead: int
    """Requests counted ahead of it when it was admitted."""
    admitted_at: float = field(default_factory=time.perf_counter)
    """When it was admitted: its own work's time is learned from here, not from its arrival,
    which counts its wait to be read (the loop's recent lag, or the kernel's figure)."""
    generating_since: float | None = None
    generation_s: float = 0.0
    shared: bool = False
    """Another request was in its own work beside this one at some time (set by
    ``FinishAdmission.account``)."""
    _book: Book | None = field(default=None, repr=False)

    @property
    def in_own_work(self) -> bool:
        return self.generating_since is None

    def generation_started(self) -> None:
        with self._held():
            if self.generating_since is None:
                if self._book is not None:
                    self._book.account()
                self.generating_since = time.perf_counter()

    def generation_ended(self) -> None:
        with self._held():
            if self.generating_since is not None:
                if self._book is not None:
                    self._book.account()
                self.generation_s += time.perf_counter() - self.generating_since
                self.generating_since = None

    def _held(self) -> threading.RLock | contextlib.nullcontext[None]:
        return self._book.lock if self._book is not None else contextlib.nullcontext()

    def finish(self, *, learn: bool = True) -> None:
        """The response ended; with ``learn``, its own work's time teaches the model (a request
        refused or failed part way does not: its work was cut short)."""
        if self._book is not None:
            self._book.finish(self, learn=learn)


@dataclass(frozen=True)
class Refusal:
    """Why a request was not admitted, and when to try again."""

    predicted_ms: float
    remaining_ms: float
    ahead: int
    retry_after_s: int

    def __str__(self) -> str:
        return (
            f"{self.ahead} requests ahead: predicted to finish in {self.predicted_ms:.0f} ms, "
            f"{self.remaining_ms:.0f} ms of its budget left"
        )
