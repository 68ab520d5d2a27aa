"""What the budget session reads of the generation backend: the targets it may send an answer
to, their reported load and context length (and how a target queues, as planning sees it:
``target_queue``), and a generation's result. Protocols, so that ``tracing`` needs nothing of
``inference``: its backends satisfy them as they are."""

from __future__ import annotations

from typing import Protocol

from tracing.budget.queue import TargetQueue


class ServingTargets(Protocol):
    """Where answers are generated, as the budget sees it (``inference.GenerationBackend``
    fits): the targets an answer may go to, their loads and context length."""

    @property
    def earliest_deadline_first(self) -> bool: ...

    @property
    def context_length(self) -> int | None: ...

    def cost_targets(self, question: str = "") -> list[str]: ...

    def target_load(self, target: str) -> ReportedLoad | None: ...


class ReportedLoad(Protocol):
    """What a serving target says of its load and order (``inference.TargetLoad`` fits)."""

    @property
    def waiting(self) -> int: ...

    @property
    def max_running(self) -> int | None: ...

    @property
    def others(self) -> int | None: ...

    @property
    def earliest_deadline_first(self) -> bool: ...

    @property
    def preempts(self) -> bool: ...


def target_queue(load: ReportedLoad | None, *, edf: bool, ours: int) -> TargetQueue:
    """How a target queues, as planning sees it: its slots; whether it serves our requests
    earliest deadline first (the backend's own queue, ``edf``, or a server that schedules by
    the deadline it is told, and may preempt for it); others' load.

    Others' load is what the server held at its last poll that was not ours then (``others``:
    a remote server's load is polled every few seconds, and its requests then were mostly ours,
    long finished; counted again, they would refuse requests behind a queue that is gone).
    Where the load does not say, it is the queue beyond the running batch, less what ``ours``
    (our open reservations there) can account for. A server ordering by deadline serves
    requests without one (another client's) after ours: none of them is ahead."""
    slots = max(load.max_running or 1, 1) if load is not None else 1
    if load is None or edf:
        return TargetQueue(slots=slots, edf=edf)
    if load.earliest_deadline_first:
        return TargetQueue(slots=slots, edf=True, preemptive=load.preempts)
    if load.others is not None:
        return TargetQueue(slots=slots, external=load.others)
    return TargetQueue(slots=slots, external=max(load.waiting - max(ours - slots, 0), 0))


class TokenUsage(Protocol):
    """A generation's token counts (``inference.Usage`` fits)."""

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def cached_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...


class GenerationResult(Protocol):
    """How one generation ended (``app.stages.Generated`` fits)."""

    @property
    def finish_reason(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def started(self) -> float: ...

    @property
    def first_at(self) -> float | None: ...

    @property
    def usage(self) -> TokenUsage | None: ...

    @property
    def queue_ms(self) -> float: ...

    @property
    def last_at(self) -> float | None: ...

    @property
    def streamed_tokens(self) -> int: ...

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def may_have_queued(self) -> bool: ...

    @property
    def shared_prefix_tokens(self) -> int | None:
        """The prompt's leading tokens every prompt shares, which the target keeps cached."""
