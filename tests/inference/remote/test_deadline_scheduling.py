"""What a serving layer is told of a request's deadline (inference/remote/scheduling.py): SGLang's
``priority`` only where ``/server_info`` says the server orders its queue by it, earliest deadline
first in the order it uses; llm-d's SLO headers; SMG's priority class; and no request at all
once its deadline has passed. Against the simulated SGLang server (bench/sglang_sim), which
follows upstream's scheduler."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from bench.sglang_sim.server import SimulatedSGLang
from inference import (
    GatewayClasses,
    GenerationDone,
    HFTokenizer,
    PromptAssembler,
    RemoteOptions,
    SGLangBackend,
    TextDelta,
    Urgency,
)
from inference.remote.scheduling import (
    PriorityOrder,
    PriorityScheduling,
    deadline_priority,
    read_priority_scheduling,
    slo_headers,
)
from tests.fakes._serve import ServerThread
from tests.fakes.passages import Doc

I32 = 2**31 - 1


def test_the_server_info_says_whether_and_how_a_server_orders_by_priority() -> None:
    on = {"enable_priority_scheduling": True, "schedule_policy": "fcfs"}
    assert read_priority_scheduling(on) == PriorityScheduling("higher_first", preempts=True)
    low = {**on, "schedule_low_priority_values_first": True, "disable_priority_preemption": True}
    assert read_priority_scheduling(low) == PriorityScheduling("lower_first", preempts=False)
    assert read_priority_scheduling({**on, "schedule_policy": "lof"}) is not None
    assert read_priority_scheduling({**on, "schedule_policy": "lpm"}) is None, "ignored there"
    assert read_priority_scheduling({"enable_priority_scheduling": False}) is None
    router = {"router_manager": {}, "workers_count": 2}  # sglang-router 0.3.2 describes itself
    assert read_priority_scheduling(router) is False, "it does not say"


@pytest.mark.parametrize("order", ["higher_first", "lower_first"])
def test_an_earlier_deadline_is_the_preferred_priority(order: Any) -> None:
    now = time.perf_counter()
    soon = deadline_priority(now + 0.7, order, now=now)
    later = deadline_priority(now + 5.0, order, now=now)
    preferred = max if order == "higher_first" else min
    assert preferred(soon, later) == soon
    assert abs(later - soon) == pytest.approx(4300, abs=2), "milliseconds of the wall clock"
    assert -I32 <= soon <= I32 and -I32 <= later <= I32, "SMG types it Option<i32>"


def test_the_slo_shares_the_time_left_in_the_plans_proportion() -> None:
    now = time.perf_counter()
    urgency = Urgency(now + 1.0, first_token_ms=100.0, per_token_ms=10.0, output_tokens=41)
    slo = urgency.slo_ms(now)
    assert slo is not None
    ttft, tpot = slo
    assert ttft == pytest.approx(200.0) and tpot == pytest.approx(20.0)
    assert ttft + 40 * tpot == pytest.approx(1000.0), "together they use the time left"
    assert slo_headers(urgency, now=now) == {
        "x-llm-d-slo-ttft-ms": "200", "x-llm-d-slo-tpot-ms": "20.0",
        "x-slo-ttft-ms": "200", "x-slo-tpot-ms": "20.0",  # the names older releases read
    }  # fmt: skip
    assert urgency.slack_ms(now) == pytest.approx(500.0)
    late = Urgency(now - 0.01, 100.0, 10.0, 41)
    assert late.slo_ms(now) is None and slo_headers(late, now=now) == {}, "never 0 ms"


def test_gateway_classes_map_the_slack() -> None:
    classes = GatewayClasses.parse("interactive<1000, default<10000, bulk")
    assert [classes.of(ms) for ms in (-5, 999, 1000, 9999, 10000)] == [
        "interactive", "interactive", "default", "default", "bulk",
    ]  # fmt: skip
    for bad in ("", "urgent<10,bulk", "bulk<10", "interactive<10,default<5,bulk", "a<1<2,bulk"):
        with pytest.raises(ValueError):
            GatewayClasses.parse(bad)


PASSAGES = [Doc("Lists are mutable sequences.")]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[SimulatedSGLang, str]]:
    sim = SimulatedSGLang()
    with ServerThread(sim.app) as server:
        yield sim, server.url


@pytest.fixture
async def make_backend(tokenizer: HFTokenizer) -> AsyncIterator[Callable[..., SGLangBackend]]:
    made: list[SGLangBackend] = []

    async def make(url: str, **kwargs: Any) -> SGLangBackend:
        kwargs.setdefault("poll_interval_s", None)
        backend = SGLangBackend([url], model="fake/tiny-chat", tokenizer=tokenizer,
                                options=RemoteOptions(**kwargs))  # fmt: skip
        made.append(backend)
        await backend.start()
        return backend

    yield make  # type: ignore[misc]
    for backend in made:
        await backend.close()


async def ask(
    backend: SGLangBackend, tokenizer: HFTokenizer, urgency: Urgency | None
) -> GenerationDone:
    prompt = PromptAssembler(tokenizer, context_tokens=100).assemble("What is a list?", PASSAGES)
    done = None
    async for event in backend.stream(prompt, max_tokens=4, urgency=urgency):
        if isinstance(event, GenerationDone):
            done = event
        assert not isinstance(event, TextDelta) or done is None
    assert done is not None
    return done


def soon(seconds: float = 2.0) -> Urgency:
    return Urgency(time.perf_counter() + seconds, 50.0, 10.0, 4)


@pytest.mark.parametrize("low_first", [False, True])
async def test_the_deadline_is_the_priority_where_the_server_schedules_by_it(
    served: tuple[SimulatedSGLang, str],
    make_backend: Callable[..., Any],
    tokenizer: HFTokenizer,
    low_first: bool,
) -> None:
    sim, url = served
    sim.reset(priority_scheduling=True, low_priority_values_first=low_first)
    backend = await make_backend(url)
    urgency = soon()
    done = await ask(backend, tokenizer, urgency)
    assert done.finish_reason == "length"
    sent = sim.generate_requests[-1].body["priority"]
    order: PriorityOrder = "lower_first" if low_first else "higher_first"
    assert abs(sent - deadline_priority(urgency.deadline, order)) <= 2
    load = backend.target_load(url)
    assert load is not None and load.earliest_deadline_first and load.preempts


async def test_no_priority_goes_to_a_server_that_does_not_schedule_by_it(
    served: tuple[SimulatedSGLang, str], make_backend: Callable[..., Any], tokenizer: HFTokenizer
) -> None:
    sim, url = served
    sim.reset(abort_on_priority_when_disabled=True)  # it would refuse a priority with a 503
    backend = await make_backend(url)
    done = await ask(backend, tokenizer, soon())
    assert done.finish_reason == "length"
    assert "priority" not in sim.generate_requests[-1].body
    load = backend.target_load(url)
    assert load is not None and not load.earliest_deadline_first


async def test_a_request_whose_deadline_passed_is_not_sent(
    served: tuple[SimulatedSGLang, str], make_backend: Callable[..., Any], tokenizer: HFTokenizer
) -> None:
    sim, url = served
    sim.reset(priority_scheduling=True)
    backend = await make_backend(url, slo_headers=True)
    done = await ask(backend, tokenizer, soon(-0.001))
    assert done.finish_reason == "deadline" and done.usage.completion_tokens == 0
    assert sim.generate_requests == [], "not sent, not even as the most urgent"


async def test_the_gateway_headers_come_from_the_plan(
    served: tuple[SimulatedSGLang, str], make_backend: Callable[..., Any], tokenizer: HFTokenizer
) -> None:
    sim, url = served
    sim.reset()
    classes = GatewayClasses.parse("interactive<5000,default<10000,bulk")
    backend = await make_backend(url, slo_headers=True, gateway_classes=classes)
    await ask(backend, tokenizer, soon(3.0))
    [sent] = sim.generate_requests  # sent: its deadline had not passed
    headers = sent.headers
    assert headers["x-smg-priority"] == "interactive", "under 5 s of slack"
    ttft, tpot = float(headers["x-llm-d-slo-ttft-ms"]), float(headers["x-llm-d-slo-tpot-ms"])
    assert 0 < ttft <= 3000 and tpot > 0 and ttft + 3 * tpot <= 3000
    await ask(backend, tokenizer, None)
    assert "x-smg-priority" not in sim.generate_requests[-1].headers, "no plan, nothing told"
    plain = await make_backend(url)
    await ask(plain, tokenizer, soon(3.0))
    told = set(sim.generate_requests[-1].headers)
    assert not told & {"x-smg-priority", "x-llm-d-slo-ttft-ms", "x-llm-d-slo-tpot-ms"}


async def test_a_polls_load_of_others_leaves_out_this_processs_own_requests(
    served: tuple[SimulatedSGLang, str], make_backend: Callable[..., Any], tokenizer: HFTokenizer
) -> None:
    """Two of ours stream and one of another client waits: the poll reads three, of which one
    is another's. Counted from the server's queue alone, our own requests of two seconds ago
    came back as others' and refused requests behind a queue that was gone."""
    sim, url = served
    sim.reset(max_running=1, itl_s=0.02, natural_tokens=100)
    backend = await make_backend(url)
    prompt = PromptAssembler(tokenizer, context_tokens=100).assemble("What is a list?", PASSAGES)

    async def ours() -> None:
        async for _ in backend.stream(prompt, max_tokens=80):
            pass

    async def another() -> None:
        body = {"input_ids": [5, 6, 7], "sampling_params": {"max_new_tokens": 80}, "stream": True}
        async with (
            httpx.AsyncClient(timeout=30) as client,
            client.stream("POST", url + "/generate", json=body) as response,
        ):
            async for _ in response.aiter_bytes():
                pass

    tasks = [asyncio.create_task(job()) for job in (ours, ours, another)]
    while len(sim.states) < 3:
        await asyncio.sleep(0.005)
    await backend.poll_once()
    load = backend.target_load(url)
    assert load is not None and (load.running, load.waiting, load.others) == (1, 2, 1)
    # The poll is what is asserted: the streams (3 x 1.6 s on one slot) are not waited out.
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_told_no_deadline_a_priority_server_is_planned_first_come(
    served: tuple[SimulatedSGLang, str], make_backend: Callable[..., Any], tokenizer: HFTokenizer
) -> None:
    """With RAGTIME_SGLANG_DEADLINE_PRIORITY off, no priority goes out, so the server serves
    ours as they come: admission must not plan them earliest deadline first."""
    sim, url = served
    sim.reset(priority_scheduling=True)
    backend = await make_backend(url, deadline_priority=False)
    await ask(backend, tokenizer, soon())
    assert "priority" not in sim.generate_requests[-1].body
    load = backend.target_load(url)
    assert load is not None and not load.earliest_deadline_first and not load.preempts
