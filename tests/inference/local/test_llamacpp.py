"""The llama.cpp backend with the real SmolLM2 model: streaming, limits, cancellation, caching."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from pathlib import Path

import pytest

from inference import (
    AssembledPrompt,
    BackendUnavailable,
    GenerationDone,
    GenerationEvent,
    LlamaCppBackend,
    PromptAssembler,
    TextDelta,
    common_prefix,
    default_generation_model_path,
)
from tests.fakes.passages import Doc
from tracing.budget import CostModel, GenerationPrior

pytestmark = pytest.mark.slow

DOCS = [
    Doc(
        "A list in Python is written with square brackets. Lists are mutable: items can be "
        "added with append."
    ),
]
SHORT_ANSWER = "How are lists written? Answer in one short sentence."
LONG_ANSWER = "Explain in detail everything about Python lists, with many examples."


def prompt_for(backend: LlamaCppBackend, question: str, docs: list[Doc] = DOCS) -> AssembledPrompt:
    return PromptAssembler(backend.tokenizer).assemble(question, docs)


async def collect(
    backend: LlamaCppBackend,
    prompt: AssembledPrompt,
    *,
    max_tokens: int,
    deadline: float | None = None,
) -> list[GenerationEvent]:
    return [e async for e in backend.stream(prompt, max_tokens=max_tokens, deadline=deadline)]


async def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.005)


async def test_streams_deltas_then_one_done_stopping_at_end_of_turn(
    llama_backend: LlamaCppBackend,
) -> None:
    prompt = prompt_for(llama_backend, SHORT_ANSWER)
    events = await collect(llama_backend, prompt, max_tokens=48)
    *deltas, done = events
    assert deltas and all(isinstance(d, TextDelta) for d in deltas)
    assert isinstance(done, GenerationDone)
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert "bracket" in text and "<|im_end|>" not in text
    assert done.finish_reason == "stop"
    assert done.usage.prompt_tokens == prompt.prompt_tokens
    assert 0 < done.usage.completion_tokens < 48
    assert 0 <= done.usage.cached_tokens < prompt.prompt_tokens
    assert done.queue_ms >= 0
    assert llama_backend.last_done == done


async def test_length_when_max_tokens_is_reached(llama_backend: LlamaCppBackend) -> None:
    prompt = prompt_for(llama_backend, LONG_ANSWER)
    events = await collect(llama_backend, prompt, max_tokens=6)
    done = events[-1]
    assert isinstance(done, GenerationDone)
    assert done.finish_reason == "length" and done.usage.completion_tokens == 6
    assert 1 <= len(events) - 1 <= 6


async def test_greedy_decoding_is_repeatable(llama_backend: LlamaCppBackend) -> None:
    prompt = prompt_for(llama_backend, LONG_ANSWER)
    first = await collect(llama_backend, prompt, max_tokens=8)
    second = await collect(llama_backend, prompt, max_tokens=8)
    assert [e for e in first if isinstance(e, TextDelta)] == [
        e for e in second if isinstance(e, TextDelta)
    ]


async def test_aclose_after_the_first_delta_stops_decoding_and_frees_the_worker(
    llama_backend: LlamaCppBackend,
) -> None:
    prompt = prompt_for(llama_backend, LONG_ANSWER)
    before = llama_backend.last_done
    async with aclosing(llama_backend.stream(prompt, max_tokens=400)) as events:
        async for event in events:
            assert isinstance(event, TextDelta)
            break
    await wait_until(lambda: llama_backend.last_done is not before)
    cancelled = llama_backend.last_done
    assert cancelled is not None and cancelled.finish_reason == "cancelled"
    assert cancelled.usage.completion_tokens <= 3
    # The worker is free (nothing of the cut answer left on it), and the next request completes.
    await wait_until(lambda: llama_backend.pending == 0)
    done = (await collect(llama_backend, prompt, max_tokens=4))[-1]
    assert isinstance(done, GenerationDone) and done.finish_reason == "length"


async def test_cancelling_the_consumer_task_stops_decoding(llama_backend: LlamaCppBackend) -> None:
    prompt = prompt_for(llama_backend, LONG_ANSWER)
    first_delta = asyncio.Event()

    async def consume() -> None:
        async for _ in llama_backend.stream(prompt, max_tokens=400):
            first_delta.set()

    before = llama_backend.last_done
    task = asyncio.create_task(consume())
    await first_delta.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_until(lambda: llama_backend.last_done is not before)
    cancelled = llama_backend.last_done
    assert cancelled is not None and cancelled.finish_reason == "cancelled"
    assert cancelled.usage.completion_tokens <= 4


async def test_concurrent_streams_are_served_one_after_the_other(
    llama_backend: LlamaCppBackend,
) -> None:
    prompt = prompt_for(llama_backend, LONG_ANSWER)
    log: list[tuple[str, GenerationEvent]] = []

    async def run(name: str) -> GenerationDone:
        async for event in llama_backend.stream(prompt, max_tokens=12):
            log.append((name, event))
            if isinstance(event, GenerationDone):
                return event
        raise AssertionError("no GenerationDone")

    first, second = await asyncio.gather(run("a"), run("b"))
    assert first.finish_reason == second.finish_reason == "length"
    assert [name for name, _ in log] == ["a"] * 13 + ["b"] * 13  # FIFO, not interleaved
    assert second.queue_ms > first.queue_ms and second.queue_ms > 20


async def test_waiting_requests_are_served_earliest_deadline_first(
    llama_backend: LlamaCppBackend,
) -> None:
    prompt = prompt_for(llama_backend, LONG_ANSWER)
    now = time.perf_counter()
    running = llama_backend.stream(prompt, max_tokens=12)  # no deadline: served last when queued
    assert isinstance(await anext(running), TextDelta)  # holds the worker
    log: list[str] = []

    async def run(name: str, deadline: float | None) -> None:
        async for event in llama_backend.stream(prompt, max_tokens=3, deadline=deadline):
            log.append(name)
            assert not isinstance(event, Exception)

    tasks = [
        asyncio.create_task(run("whenever", None)),
        asyncio.create_task(run("late", now + 60)),
        asyncio.create_task(run("soon", now + 20)),
    ]
    await asyncio.sleep(0.05)  # all three wait behind ``running``, in arrival order
    assert len(llama_backend._waiting) == 3
    _ = [event async for event in running]
    await asyncio.gather(*tasks)
    firsts = list(dict.fromkeys(log))
    assert firsts == ["soon", "late", "whenever"]


async def test_a_request_whose_deadline_is_out_of_reach_at_its_turn_is_dropped(
    llama_backend: LlamaCppBackend,
) -> None:
    """Re-checked at the front of the queue: a request with less time left than its first
    token needs at least, by the cost model, ends at once (finish ``deadline``, no tokens), its
    prompt never evaluated; the one after it, with time, is served."""
    prompt = prompt_for(llama_backend, LONG_ANSWER)
    llama_backend.costs = CostModel(generation_prior=FIRST_TOKEN_IN_200_MS)
    try:
        assert llama_backend.least_first_token_s(len(prompt.token_ids)) == pytest.approx(0.2)
        dropped_before = llama_backend.dropped
        running = llama_backend.stream(prompt, max_tokens=12)
        assert isinstance(await anext(running), TextDelta)  # holds the worker
        now = time.perf_counter()
        doomed = [
            e
            async for e in _after(
                running, llama_backend.stream(prompt, max_tokens=8, deadline=now + 0.1)
            )
        ]
        served = [e async for e in llama_backend.stream(prompt, max_tokens=2, deadline=now + 60)]
    finally:
        llama_backend.costs = None
    done = doomed[-1]
    assert len(doomed) == 1 and isinstance(done, GenerationDone)
    assert done.finish_reason == "deadline" and done.usage.completion_tokens == 0
    assert llama_backend.dropped == dropped_before + 1
    assert isinstance(served[-1], GenerationDone) and served[-1].usage.completion_tokens > 0


async def test_slow_first_tokens_cannot_make_it_drop_every_request(
    llama_backend: LlamaCppBackend,
) -> None:
    """A fresh process's first answers on a loaded machine took longer than a whole budget. The
    drop rule then dropped every request, and none ran to measure anything faster. Each drop
    ages what the cost model learned, so that its prior returns: a request is served again
    after a few drops."""
    prompt = prompt_for(llama_backend, LONG_ANSWER)
    costs = CostModel(generation_prior=FIRST_TOKEN_IN_200_MS)
    target = llama_backend.cost_target("")
    for _ in range(3):  # three first tokens that took 30 s each
        costs.generation(target).observe_first_token(len(prompt.token_ids), 30_000.0)
    llama_backend.costs = costs
    try:
        assert llama_backend.least_first_token_s(len(prompt.token_ids)) > 5.0
        dropped_before = llama_backend.dropped
        ends = []
        for _ in range(6):
            deadline = time.perf_counter() + 5
            events = [
                e async for e in llama_backend.stream(prompt, max_tokens=2, deadline=deadline)
            ]
            done = events[-1]
            assert isinstance(done, GenerationDone)
            ends.append(done.finish_reason)
            if done.usage.completion_tokens:
                break
    finally:
        llama_backend.costs = None
    drops = llama_backend.dropped - dropped_before
    assert ends[:drops] == ["deadline"] * drops and 1 <= drops <= 4
    assert ends[-1] != "deadline"


#: A target whose first token takes 200 ms whatever the prompt, before anything is learned.
FIRST_TOKEN_IN_200_MS = GenerationPrior(
    fixed_ms=200.0, prefill_ms_per_token=0.0, decode_ms_per_token=10.0
)


async def _after(
    running: AsyncGenerator[GenerationEvent, None], queued: AsyncGenerator[GenerationEvent, None]
) -> AsyncGenerator[GenerationEvent, None]:
    """``queued``'s events, submitted while ``running`` holds the worker, which then finishes."""
    first = asyncio.ensure_future(anext(queued))
    await asyncio.sleep(0.05)
    _ = [event async for event in running]
    yield await first
    async for event in queued:
        yield event


async def test_a_request_cancelled_while_queued_never_decodes(
    llama_backend: LlamaCppBackend,
) -> None:
    prompt = prompt_for(llama_backend, LONG_ANSWER)
    running = llama_backend.stream(prompt, max_tokens=12)
    queued = llama_backend.stream(prompt, max_tokens=12)
    assert isinstance(await anext(running), TextDelta)

    async def first_of_queued() -> GenerationEvent:
        return await anext(queued)

    waiting = asyncio.create_task(first_of_queued())  # submitted behind ``running``
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    rest = [event async for event in running]
    assert isinstance(rest[-1], GenerationDone) and rest[-1].finish_reason == "length"
    await wait_until(lambda: llama_backend.last_done is not rest[-1])
    skipped = llama_backend.last_done
    assert skipped is not None and skipped.finish_reason == "cancelled"
    assert skipped.usage.completion_tokens == 0 and skipped.queue_ms > 0


async def test_cached_tokens_count_the_reused_prefix() -> None:
    backend = LlamaCppBackend()  # its own, so that the first prompt is cold
    await backend.start()
    try:
        docs = [Doc("Stacks are lists used last-in, first-out. " * 12)]
        cold = prompt_for(backend, "What is a stack?", docs)
        warm = prompt_for(backend, "How do I pop from a stack?", docs)
        shared = common_prefix(cold.token_ids, warm.token_ids)
        assert shared > 100

        start = time.perf_counter()
        cold_events = await collect(backend, cold, max_tokens=4)
        cold_s = time.perf_counter() - start
        start = time.perf_counter()
        warm_events = await collect(backend, warm, max_tokens=4)
        warm_s = time.perf_counter() - start
        again_events = await collect(backend, warm, max_tokens=4)
        cold_done, warm_done, again_done = cold_events[-1], warm_events[-1], again_events[-1]
        assert isinstance(cold_done, GenerationDone) and isinstance(warm_done, GenerationDone)
        assert isinstance(again_done, GenerationDone)
        assert cold_done.usage.cached_tokens == 0
        assert warm_done.usage.cached_tokens == shared
        assert again_done.usage.cached_tokens == warm.prompt_tokens - 1
        assert warm_s < cold_s
    finally:
        await backend.close()
    assert not backend.loaded
    with pytest.raises(BackendUnavailable):
        await collect(backend, cold, max_tokens=4)
    with pytest.raises(BackendUnavailable):
        backend.tokenizer.count("closed")


async def test_prompt_longer_than_the_context_fails_before_the_first_token(
    llama_backend: LlamaCppBackend,
) -> None:
    prompt = prompt_for(llama_backend, SHORT_ANSWER)
    huge = AssembledPrompt(
        text="",
        token_ids=prompt.token_ids * 40,
        prompt_tokens=len(prompt.token_ids) * 40,
        passages=[],
        dropped=0,
        context_tokens_budget=0,
        context_tokens_used=0,
    )
    with pytest.raises(BackendUnavailable, match="context"):
        await collect(llama_backend, huge, max_tokens=4)
    assert isinstance((await collect(llama_backend, prompt, max_tokens=2))[-1], GenerationDone)


async def test_missing_model_file_is_backend_unavailable(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.gguf"
    backend = LlamaCppBackend(missing)
    assert backend.model == "nowhere" and not backend.loaded
    with pytest.raises(BackendUnavailable, match=re.escape(str(missing))):
        await backend.start()
    assert not backend.loaded
    with pytest.raises(BackendUnavailable):
        backend.tokenizer.count("x")
    prompt = AssembledPrompt("", [1, 2], 2, [], 0, 0, 0)
    with pytest.raises(BackendUnavailable):
        await collect(backend, prompt, max_tokens=4)
    await backend.close()


async def test_unloadable_file_is_backend_unavailable(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file")
    backend = LlamaCppBackend(junk)
    with pytest.raises(BackendUnavailable, match=r"junk\.gguf"):
        await backend.start()
    await backend.close()


def test_default_model_is_the_packaged_smollm2() -> None:
    path = default_generation_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert LlamaCppBackend().model == "SmolLM2-135M-Instruct.Q4_1"


async def test_a_kept_prompt_state_comes_back_after_an_unrelated_prompt() -> None:
    """Two users' questions take turns: each finds its passages' KV state again, and the
    answer from a restored state is the one a cold cache gives."""
    stacks = [Doc("Stacks are lists used last-in, first-out. " * 12)]
    queues = [Doc("Queues hand items out first-in, first-out, with a deque. " * 12)]
    backend = LlamaCppBackend(prefix_states=2)
    cold_backend = LlamaCppBackend(prefix_states=0)
    await backend.start()
    await cold_backend.start()
    try:
        first = prompt_for(backend, "What is a stack?", stacks)
        other = prompt_for(backend, "What is a queue?", queues)
        again = prompt_for(backend, "How do I pop from a stack?", stacks)
        shared = common_prefix(first.token_ids, again.token_ids)
        await collect(backend, first, max_tokens=4)
        await collect(backend, other, max_tokens=4)  # would have wiped the stack passage
        restored = await collect(backend, again, max_tokens=8)
        await collect(cold_backend, other, max_tokens=4)
        cold = await collect(cold_backend, again, max_tokens=8)
        done, cold_done = restored[-1], cold[-1]
        assert isinstance(done, GenerationDone) and isinstance(cold_done, GenerationDone)
        assert backend.prefix_states.restored == 1
        assert done.usage.cached_tokens == shared > 100
        assert cold_done.usage.cached_tokens < shared - 100  # only the system prompt survived
        text = "".join(e.text for e in restored if isinstance(e, TextDelta))
        assert text == "".join(e.text for e in cold if isinstance(e, TextDelta))
    finally:
        await backend.close()
        await cold_backend.close()
