"""The overload bench's loads against one ragtime server in front of a simulated SGLang engine:
a closed loop of as many users as the engine has slots (its capacity), an open loop of Poisson
arrivals at a multiple of that capacity, each request with a budget of its own, and the server's
own count of the requests it refused at arrival (so that a 504 after admission is told from a
refusal)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import httpx

from bench.harness.arrivals import closed_loop, open_loop, poisson_offsets
from bench.harness.client import RequestRecord, Target, ask_stream

_REFUSED = re.compile(
    r'^ragtime_admission_refused_total\{[^}]*reason="([^"]+)"[^}]*\} (\S+)$', re.M
)


async def refused_at_arrival(client: httpx.AsyncClient, target: Target) -> dict[str, float]:
    """``ragtime_admission_refused_total`` by reason, summed over routes (``/metrics``)."""
    response = await client.get(f"{target.url}/metrics")
    counts: dict[str, float] = {}
    for reason, value in _REFUSED.findall(response.text):
        counts[reason] = counts.get(reason, 0.0) + float(value)
    return counts


def counted_since(before: dict[str, float], after: dict[str, float]) -> int:
    """Refusals at arrival between two readings of ``refused_at_arrival``."""
    return round(sum(after.values()) - sum(before.values()))


async def users_loop(
    client: httpx.AsyncClient,
    target: Target,
    questions: Sequence[str],
    *,
    users: int,
    requests: int,
    budget_ms: int,
    timeout_s: float,
) -> tuple[list[RequestRecord], float]:
    """``requests`` questions from ``users`` users, each asking again once answered; the
    records and the wall seconds."""
    records: list[RequestRecord] = []

    async def ask(index: int, due: float) -> None:
        question = questions[index % len(questions)]
        records.append(
            await ask_stream(client, target, question, index=index, due=due,
                             budget_ms=budget_ms, timeout_s=timeout_s)
        )  # fmt: skip

    wall_s = await closed_loop(users, ask, count=requests)
    return records, wall_s


async def arrivals_loop(
    client: httpx.AsyncClient,
    target: Target,
    questions: Sequence[str],
    *,
    rate: float,
    duration_s: float,
    budget_of: Callable[[int], int],
    seed: int,
    timeout_s: float,
) -> list[RequestRecord]:
    """Poisson arrivals at ``rate`` per second for ``duration_s``, request ``i`` with a budget
    of ``budget_of(i)`` ms; each record's ``scheduled_s`` is its arrival."""
    offsets = poisson_offsets(rate, duration_s=duration_s, seed=seed)
    records: list[RequestRecord] = []

    async def ask(index: int, due: float) -> None:
        question = questions[(index * 7 + seed) % len(questions)]
        records.append(
            await ask_stream(client, target, question, index=index, due=due,
                             phase_start=due - offsets[index], budget_ms=budget_of(index),
                             timeout_s=timeout_s)
        )  # fmt: skip

    await open_loop(offsets, ask)
    return sorted(records, key=lambda r: r.index)
