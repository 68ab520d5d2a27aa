"""The simulated SGLang server's queue: the order SGLang 0.5.23 serves it in, with and without
priority scheduling (bench/sglang_sim/queueing.py cites the upstream files), its preemption, a
full queue's eviction, the refusal of a priority the server does not schedule by, and an engine
that slows down without notice."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import httpx
import pytest

from bench.sglang_sim.process import spec_args
from bench.sglang_sim.queueing import Batch, Order, Turn
from bench.sglang_sim.scheduler import ReqState
from bench.sglang_sim.server import EVICTED, PRIORITY_DISABLED, SimulatedSGLang
from tests.fakes._serve import ServerThread


def batch(**order: object) -> tuple[Batch, list[str]]:
    preempted: list[str] = []
    return Batch(Order(**order), lambda t: preempted.append(t.rid)), preempted  # type: ignore[arg-type]


def admitted(b: Batch) -> list[str]:
    return [t.rid for t in b.running]


async def test_without_priority_scheduling_the_queue_is_first_come_first_served() -> None:
    b, _ = batch(max_running=1)
    first = b.join("first", 0)
    b.join("low", 0)
    b.join("high", 100)
    b.leave(first)
    assert admitted(b) == ["low"]


@pytest.mark.parametrize(("low_first", "served"), [(False, "high"), (True, "low")])
async def test_priority_scheduling_serves_the_preferred_value_first(
    low_first: bool, served: str
) -> None:
    b, _ = batch(max_running=1, priority_scheduling=True, low_values_first=low_first,
                 preemption=False)  # fmt: skip
    first = b.join("first", 50)
    b.join("low", 0)
    b.join("high", 100)
    b.join("none", None)
    b.leave(first)
    assert admitted(b) == [served]
    b.leave(b.running[0])
    b.leave(b.running[0])
    assert admitted(b) == ["none"], "a request without a priority is the least preferred"


async def test_a_request_preferred_beyond_the_threshold_preempts_the_least_preferred() -> None:
    b, preempted = batch(max_running=2, priority_scheduling=True, preemption_threshold=10)
    b.join("a", 0)
    loose = b.join("loose", -5000)
    b.join("close", 8)  # beats "loose" by far, but the batch takes it only by preemption
    assert preempted == ["loose"] and set(admitted(b)) == {"a", "close"}
    assert not loose.admitted.is_set() and loose.preempted == 1
    b.join("near", 12)  # beats "a" (0) by 12 > 10: preempts it too
    assert preempted == ["loose", "a"]
    b.join("within", 13)  # beats the least preferred running one (8) by 5 only: it waits
    assert preempted == ["loose", "a"] and [t.rid for t in b.waiting] == ["loose", "a", "within"]


async def test_preemption_can_be_disabled() -> None:
    b, preempted = batch(max_running=1, priority_scheduling=True, preemption=False)
    b.join("loose", -5000)
    b.join("tight", 5000)
    assert preempted == [] and admitted(b) == ["loose"]


async def test_a_full_queue_evicts_the_least_preferred_waiting_request_for_a_better_one() -> None:
    b, _ = batch(max_running=1, priority_scheduling=True, preemption=False)
    b.join("running", 0)
    b.join("old-low", 1)
    newest_low: Turn = b.join("new-low", 1)
    assert b.to_evict_for(5) is newest_low, "the least preferred, the newest of equals"
    assert b.to_evict_for(1) is None, "only a strictly preferred newcomer evicts"
    fcfs, _ = batch(max_running=1)
    fcfs.join("running", 0)
    fcfs.join("waiting", 0)
    assert fcfs.to_evict_for(5) is None, "without priority scheduling the newcomer is refused"


def test_the_spec_turns_launch_switches_into_flags() -> None:
    assert spec_args("max_running=2,enable_priority_scheduling=true,slow_factor=3") == [
        "--max-running", "2", "--enable-priority-scheduling", "--slow-factor", "3",
    ]  # fmt: skip
    assert spec_args("enable_priority_scheduling=false") == []


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[SimulatedSGLang, str]]:
    sim = SimulatedSGLang()
    with ServerThread(sim.app) as server:
        yield sim, server.url


def body(rid: str, priority: int | None = None, tokens: int = 4) -> dict[str, object]:
    out: dict[str, object] = {
        "input_ids": [5, 6, 7],
        "sampling_params": {"max_new_tokens": tokens},
        "stream": True,
        "rid": rid,
    }
    if priority is not None:
        out["priority"] = priority
    return out


async def stream(client: httpx.AsyncClient, url: str, payload: dict[str, object]) -> list[dict]:
    chunks = []
    async with client.stream("POST", url + "/generate", json=payload) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line.removeprefix("data: ")))
    return chunks


def finish(chunks: list[dict]) -> dict:
    return chunks[-1]["meta_info"]["finish_reason"]


async def test_server_info_tells_how_the_queue_is_ordered(
    served: tuple[SimulatedSGLang, str],
) -> None:
    sim, url = served
    sim.reset(priority_scheduling=True, low_priority_values_first=True, preemption_threshold=7)
    async with httpx.AsyncClient() as client:
        info = (await client.get(url + "/server_info")).json()
    assert info["enable_priority_scheduling"] is True
    assert info["schedule_low_priority_values_first"] is True
    assert info["priority_scheduling_preemption_threshold"] == 7
    assert info["schedule_policy"] == "fcfs"


async def test_a_priority_is_refused_where_the_server_says_so(
    served: tuple[SimulatedSGLang, str],
) -> None:
    sim, url = served
    sim.reset(abort_on_priority_when_disabled=True)
    async with httpx.AsyncClient() as client:
        refused = await stream(client, url, body("a" * 32, priority=3))
        plain = await stream(client, url, body("b" * 32))
    assert finish(refused) == {
        "type": "abort", "message": PRIORITY_DISABLED, "status_code": 503, "err_type": None,
    }  # fmt: skip
    assert finish(plain)["type"] == "length"


async def test_a_preempted_request_resumes_and_loses_nothing(
    served: tuple[SimulatedSGLang, str],
) -> None:
    sim, url = served
    sim.reset(max_running=1, priority_scheduling=True, itl_s=0.02, natural_tokens=100)
    async with httpx.AsyncClient(timeout=30) as client:
        loose = asyncio.create_task(stream(client, url, body("l" * 32, priority=-1000, tokens=60)))
        while not sim.states.get("l" * 32) or not sim.states["l" * 32].output:
            await asyncio.sleep(0.005)
        tight = await stream(client, url, body("t" * 32, priority=1000, tokens=3))
        loose_chunks = await loose
    assert ("preempted", "l" * 32) in sim.events
    assert finish(tight)["type"] == "length"
    assert finish(loose_chunks) == {"type": "length", "length": 60}
    assert len(loose_chunks[-1]["output_ids"]) == 60, "it kept what it had generated"
    assert sim.events.index(("finished", "t" * 32)) < sim.events.index(("finished", "l" * 32))


async def test_a_full_queue_aborts_the_evicted_request_with_its_own_message(
    served: tuple[SimulatedSGLang, str],
) -> None:
    sim, url = served
    sim.reset(max_running=1, queue_capacity=1, priority_scheduling=True,
              priority_preemption=False, itl_s=0.05, natural_tokens=100)  # fmt: skip
    async with httpx.AsyncClient(timeout=30) as client:
        # Long enough (2 s) to hold the only slot while the others arrive, however slow the
        # machine: the test waits on the queue's state, not on the clock.
        running = asyncio.create_task(stream(client, url, body("r" * 32, priority=0, tokens=40)))
        while "r" * 32 not in sim.states:
            await asyncio.sleep(0.005)
        low = asyncio.create_task(stream(client, url, body("l" * 32, priority=1)))
        while not sim.batch.waiting:
            await asyncio.sleep(0.005)
        high = await stream(client, url, body("h" * 32, priority=9))
        evicted = await low
        await running
    assert finish(evicted)["message"] == EVICTED and finish(evicted)["status_code"] == 503
    assert finish(high)["type"] == "length"


async def test_the_bench_slows_the_engine_down_without_notice(
    served: tuple[SimulatedSGLang, str],
) -> None:
    sim, url = served
    sim.reset(ttft_s=0.01)
    async with httpx.AsyncClient() as client:
        assert (await client.post(url + "/bench/pace", json={"factor": 0})).status_code == 400
        assert (await client.post(url + "/bench/pace", json={"factor": 3})).json() == {"factor": 3}
        info = (await client.get(url + "/server_info")).json()
    assert sim._pace() == 3.0 and "slow_factor" not in info, "ragtime is not told"
    state = ReqState("x" * 32, [5, 6, 7], 4, True)
    assert sim._prefill_s(state, sim.config) == pytest.approx(0.03)
