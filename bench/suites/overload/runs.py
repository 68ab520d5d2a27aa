"""The overload bench's runs (every request of each kept in ``--log-dir``, one JSON line
each), each against a ragtime server of its own in front of a simulated
SGLang engine of its own (``bench/sglang_sim``), started from the same config and engine spec:

1. **capacity and overload**: a closed loop of as many users as the engine has slots at a loose
   budget (the capacity), then open-loop arrivals at ``load`` times that capacity;
2. **slowdown**: the same arrivals; a third of the way in the engine becomes ``factor`` times
   slower (``POST /bench/pace``: ragtime is not told); then a closed loop measures the slowed
   capacity;
3. **priority**: arrivals at ``mixed_load`` times the capacity, each request's budget tight or
   loose, against the engine with priority scheduling off, then on.

Each server answers a few warm-up questions first (not counted), so that the cost model has
seen the engine.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.harness.client import Target, make_client
from bench.suites.overload.loads import (
    arrivals_loop,
    counted_since,
    refused_at_arrival,
    users_loop,
)
from bench.suites.overload.results import (
    Capacity,
    OpenRun,
    OverloadBench,
    Slowdown,
    capacity,
    open_run,
    outcomes,
)


@dataclass(frozen=True)
class Plan:
    """What the bench runs (``ragtime bench overload``'s options)."""

    config: Path
    engine: str
    slots: int
    questions: Sequence[str]
    runs: frozenset[str]
    capacity_requests: int = 48
    loose_budget_ms: int = 10000
    load: float = 2.0
    budget_ms: int = 3000
    duration_s: float = 30.0
    slow_factor: float = 3.0
    mixed_load: float = 1.5
    tight_ms: int = 700
    loose_ms: int = 5000
    tight_share: float = 0.5
    warmup: int = 8
    timeout_s: float = 30.0
    seed: int = 0
    log_dir: Path = Path("bench-results/logs")


@contextmanager
def served(plan: Plan, name: str, engine: str) -> Iterator[tuple[Target, str]]:
    """ragtime from ``plan.config`` in front of a simulated engine of ``engine``: its target,
    and the engine's URL."""
    from bench.harness.serve import config_key, ragtime_server, read_config
    from bench.sglang_sim.process import simulated_sglang

    with ExitStack() as stack:
        sim = stack.enter_context(
            simulated_sglang(engine, log_dir=plan.log_dir, name=f"{name}-sglang")
        )
        config = {**read_config(plan.config), **sim.ragtime_config}
        server = stack.enter_context(ragtime_server(name, config, log_dir=plan.log_dir))
        yield Target(name, server.url, config_key(config)), sim.url


async def warm(client: httpx.AsyncClient, target: Target, plan: Plan) -> None:
    await users_loop(client, target, plan.questions, users=min(plan.slots, 4),
                     requests=plan.warmup, budget_ms=plan.loose_budget_ms,
                     timeout_s=plan.timeout_s)  # fmt: skip


async def measure_capacity(client: httpx.AsyncClient, target: Target, plan: Plan) -> Capacity:
    records, wall_s = await users_loop(
        client, target, plan.questions, users=plan.slots, requests=plan.capacity_requests,
        budget_ms=plan.loose_budget_ms, timeout_s=plan.timeout_s,
    )  # fmt: skip
    return capacity(plan.slots, plan.loose_budget_ms, records, wall_s)


async def open_arrivals(
    client: httpx.AsyncClient,
    target: Target,
    plan: Plan,
    *,
    label: str,
    load: float,
    rate: float,
    budget_of: Callable[[int], int],
    during: Callable[[], Any] | None = None,
) -> tuple[OpenRun, list[Any]]:
    """One open run; ``during`` runs beside it (the slowdown's switch)."""
    before = await refused_at_arrival(client, target)
    loop = arrivals_loop(client, target, plan.questions, rate=rate, duration_s=plan.duration_s,
                         budget_of=budget_of, seed=plan.seed, timeout_s=plan.timeout_s)  # fmt: skip
    if during is None:
        records = await loop
    else:
        records, _ = await asyncio.gather(loop, during())
    refused = counted_since(before, await refused_at_arrival(client, target))
    plan.log_dir.mkdir(parents=True, exist_ok=True)
    kept = plan.log_dir / f"{target.name}-requests.jsonl"
    kept.write_text("".join(r.model_dump_json() + "\n" for r in records))
    return open_run(label, load, rate, plan.duration_s, records, refused), records


async def overload_runs(target: Target, plan: Plan, result: OverloadBench) -> None:
    async with make_client(max_connections=512, timeout_s=plan.timeout_s) as client:
        await warm(client, target, plan)
        result.capacity = await measure_capacity(client, target, plan)
        rate = plan.load * result.capacity.rps
        result.overload, _ = await open_arrivals(
            client, target, plan, label=f"overload {plan.load:g}x", load=plan.load, rate=rate,
            budget_of=lambda _: plan.budget_ms,
        )  # fmt: skip


async def slowdown_run(target: Target, engine_url: str, plan: Plan, result: OverloadBench) -> None:
    assert result.capacity is not None
    rate = plan.load * result.capacity.rps
    at_s = plan.duration_s / 3.0

    async def slow_down() -> None:
        await asyncio.sleep(at_s)
        async with httpx.AsyncClient() as sim:
            response = await sim.post(engine_url + "/bench/pace", json={"factor": plan.slow_factor})
            response.raise_for_status()

    async with make_client(max_connections=512, timeout_s=plan.timeout_s) as client:
        await warm(client, target, plan)
        run, records = await open_arrivals(
            client, target, plan, label=f"{plan.slow_factor:g}x slower at {at_s:g} s",
            load=plan.load, rate=rate, budget_of=lambda _: plan.budget_ms, during=slow_down,
        )  # fmt: skip
        slowed = await measure_capacity(client, target, plan)
    first = [r for r in records if r.scheduled_s < at_s]
    rest = [r for r in records if r.scheduled_s >= at_s]
    rest_503 = sum(1 for r in rest if r.status == 503)
    after = outcomes(rest, rest_503)
    result.slowdown = Slowdown(
        factor=plan.slow_factor, at_s=at_s, run=run,
        before=outcomes(first, sum(1 for r in first if r.status == 503)), after=after,
        goodput_after_rps=round(after.useful / (plan.duration_s - at_s), 3),
        slowed_capacity=slowed,
    )  # fmt: skip


async def priority_run(target: Target, plan: Plan, result: OverloadBench, *, on: bool) -> None:
    assert result.capacity is not None
    rate = plan.mixed_load * result.capacity.rps
    rng = random.Random(plan.seed)
    tight = [rng.random() < plan.tight_share for _ in range(100000)]
    async with make_client(max_connections=512, timeout_s=plan.timeout_s) as client:
        await warm(client, target, plan)
        label = f"mixed {plan.mixed_load:g}x, priority {'on' if on else 'off'}"
        run, _ = await open_arrivals(
            client, target, plan, label=label,
            load=plan.mixed_load, rate=rate,
            budget_of=lambda i: plan.tight_ms if tight[i % len(tight)] else plan.loose_ms,
        )  # fmt: skip
    if on:
        result.priority_on = run
    else:
        result.priority_off = run


def run_overload_bench(plan: Plan, *, command: str, say: Any = print) -> OverloadBench:
    from bench.harness.record import machine_info, now_iso, versions

    result = OverloadBench(created=now_iso(), command=command, machine=machine_info(),
                           versions=versions(), engine=plan.engine,
                           slots=plan.slots)  # fmt: skip
    say(f"capacity and overload ({plan.engine}) ...")
    with served(plan, "overload", plan.engine) as (target, _):
        asyncio.run(overload_runs(target, plan, result))
    assert result.capacity is not None and result.overload is not None
    say(f"capacity {result.capacity.rps:g}/s; overload goodput {result.overload.goodput_rps:g}/s")
    if "slowdown" in plan.runs:
        say("slowdown ...")
        with served(plan, "slowdown", plan.engine) as (target, engine_url):
            asyncio.run(slowdown_run(target, engine_url, plan, result))
    if "priority" in plan.runs:
        for on in (False, True):
            say(f"mixed budgets, priority scheduling {'on' if on else 'off'} ...")
            engine = f"{plan.engine},enable_priority_scheduling={'true' if on else 'false'}"
            with served(plan, f"priority-{'on' if on else 'off'}", engine) as (target, _):
                asyncio.run(priority_run(target, plan, result, on=on))
    return result
