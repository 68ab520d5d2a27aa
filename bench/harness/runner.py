"""Orchestration: warm up, run the measured rounds, alternate targets, sweep rates.

The load generator runs in this process; every server it drives runs in another one (started by
``bench.harness.serve`` or already running), so the client never shares the server's event loop.
With several targets, the measured work is cut into rounds and the targets take turns round by
round (A B, B A, A B, ...), so that drift in a noisy machine falls on all of them alike.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import httpx

from bench.harness.arrivals import closed_loop, open_loop, poisson_offsets
from bench.harness.client import RequestRecord, Target, ask_stream, make_client
from bench.harness.progress import Progress
from bench.harness.results import Ceiling, Run, find_ceiling, holds, summarize_run


@dataclass(frozen=True)
class LoadSpec:
    """A closed loop of ``users`` or an open loop at ``rate``, for ``requests`` or seconds."""

    users: int | None = None
    rate: float | None = None
    requests: int | None = None
    duration_s: float | None = None
    warmup: int = 0
    budget_ms: int | None = None
    rounds: int = 1
    seed: int = 0
    timeout_s: float = 60.0

    def __post_init__(self) -> None:
        if (self.users is None) == (self.rate is None):
            raise ValueError("give exactly one of users (closed loop) and rate (open loop)")
        if (self.requests is None) == (self.duration_s is None):
            raise ValueError("give exactly one of requests and duration_s")
        if self.rounds < 1 or self.warmup < 0:
            raise ValueError("rounds must be >= 1 and warmup >= 0")

    @property
    def mode(self) -> str:
        return "closed" if self.users is not None else "open"

    @property
    def label(self) -> str:
        if self.users is not None:
            return f"{self.users} user" + ("s" if self.users != 1 else "")
        return f"{self.rate:g} req/s"

    def at_rate(self, rate: float) -> LoadSpec:
        return replace(self, rate=rate, users=None)

    def round_sizes(self) -> list[int | None]:
        """Requests in each round (``None`` everywhere for a timed run)."""
        if self.requests is None:
            return [None] * self.rounds
        per = math.ceil(self.requests / self.rounds)
        sizes = [min(per, self.requests - i * per) for i in range(self.rounds)]
        return [s for s in sizes if s > 0]


async def run_phase(
    client: httpx.AsyncClient,
    target: Target,
    questions: Sequence[str],
    spec: LoadSpec,
    *,
    count: int | None,
    duration_s: float | None,
    seed: int,
    first_index: int = 0,
    progress: Progress | None = None,
) -> tuple[list[RequestRecord], float]:
    """One uninterrupted stretch of load on one target; its records and wall seconds."""
    records: list[RequestRecord] = []
    offsets: list[float] = []
    origin = 0.0

    async def dispatch(index: int, due: float) -> None:
        nonlocal origin
        # Open loop: the schedule's time 0; closed loop: the first send.
        origin = due - offsets[index] if offsets else (origin or due)
        question = questions[(first_index + index) % len(questions)]
        record = await ask_stream(
            client,
            target,
            question,
            index=first_index + index,
            due=due,
            phase_start=origin,
            budget_ms=spec.budget_ms,
            timeout_s=spec.timeout_s,
        )
        records.append(record)
        if progress is not None:
            progress.update()

    if spec.users is not None:
        wall = await closed_loop(spec.users, dispatch, count=count, duration_s=duration_s)
    else:
        assert spec.rate is not None
        offsets = poisson_offsets(spec.rate, count=count, duration_s=duration_s, seed=seed)
        wall = await open_loop(offsets, dispatch)
    records.sort(key=lambda r: r.index)
    return records, wall


async def measure(
    targets: Sequence[Target],
    questions: Sequence[str],
    spec: LoadSpec,
    *,
    show_progress: bool = True,
) -> list[Run]:
    """Each target under ``spec``, warmed up first, rounds alternating; one ``Run`` each."""
    if not questions:
        raise ValueError("no questions")
    records: dict[str, list[RequestRecord]] = {t.name: [] for t in targets}
    walls: dict[str, float] = {t.name: 0.0 for t in targets}
    connections = (spec.users or 0) + 8 if spec.users is not None else 256
    async with make_client(max_connections=connections, timeout_s=spec.timeout_s) as client:
        for target in targets:
            if spec.warmup:
                _say(show_progress, f"warm-up: {target.name}, {spec.label}, {spec.warmup} requests")
                await run_phase(
                    client, target, questions, spec, count=spec.warmup, duration_s=None,
                    seed=spec.seed + 9_999, first_index=10_000,
                )  # fmt: skip
        sizes = spec.round_sizes()
        total = spec.requests * len(targets) if spec.requests is not None else None
        progress = Progress(f"{spec.label:>12}", total) if show_progress else None
        first_index = 0
        for number, size in enumerate(sizes):
            duration = None if spec.duration_s is None else spec.duration_s / spec.rounds
            order = list(targets) if number % 2 == 0 else list(reversed(targets))
            for target in order:
                got, wall = await run_phase(
                    client, target, questions, spec, count=size, duration_s=duration,
                    seed=spec.seed + number, first_index=first_index, progress=progress,
                )  # fmt: skip
                records[target.name].extend(got)
                walls[target.name] += wall
            first_index += size if size is not None else 100_000
        if progress is not None:
            progress.close()
    return [
        Run(
            target=t.name,
            load=spec.label,
            mode="closed" if spec.users is not None else "open",
            users=spec.users,
            rate=spec.rate,
            wall_s=round(walls[t.name], 4),
            summary=summarize_run(records[t.name], walls[t.name], offered_rps=spec.rate),
            requests=records[t.name],
        )
        for t in targets
    ]


async def sweep(
    targets: Sequence[Target],
    questions: Sequence[str],
    spec: LoadSpec,
    rates: Sequence[float],
    *,
    requests_at: Callable[[float], int] | None = None,
    patience: int | None = None,
    factor: float = 2.0,
    show_progress: bool = True,
) -> tuple[list[Run], list[Ceiling]]:
    """Open loops at each of ``rates`` (ascending); the ceiling of each target.

    ``requests_at(rate)``, when given, sizes each rate's run in requests (so that every rate
    gets enough samples for its p99) instead of ``spec``'s size. With ``patience``, a target
    leaves the sweep after that many consecutive rates at which its TTFT p99 reached ``factor``
    times its value at the lowest rate (its ceiling has been found; one failure alone may be a
    stall of a noisy machine).
    """
    runs: list[Run] = []
    active = list(targets)
    limits: dict[str, float | None] = {}
    misses: dict[str, int] = {t.name: 0 for t in targets}
    for rate in sorted(rates):
        if not active:
            break
        at = spec.at_rate(rate)
        if requests_at is not None:
            at = replace(at, requests=requests_at(rate), duration_s=None)
        got = await measure(active, questions, at, show_progress=show_progress)
        runs.extend(got)
        for run in got:
            if run.target not in limits:
                p99 = run.summary.ttft_ms.p99
                limits[run.target] = None if p99 is None else p99 * factor
                continue
            misses[run.target] = 0 if holds(run, limits[run.target]) else misses[run.target] + 1
            if patience is not None and misses[run.target] >= patience:
                active = [t for t in active if t.name != run.target]
        _say(show_progress, _sweep_line(got))
    ceilings = [
        find_ceiling([r for r in runs if r.target == t.name], factor=factor) for t in targets
    ]
    return runs, ceilings


def _sweep_line(runs: Sequence[Run]) -> str:
    parts = [
        f"{r.target}: TTFT p99 {r.summary.ttft_ms.fmt('p99')} ms, "
        f"{r.summary.throughput_rps:.0f} req/s answered, errors {r.summary.error_ratio:.1%}"
        for r in runs
    ]
    return f"  {runs[0].load}: " + "; ".join(parts) if runs else ""


def _say(enabled: bool, text: str) -> None:
    if enabled and text:
        print(text, file=sys.stderr, flush=True)
