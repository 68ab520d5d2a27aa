"""The assemble and generate stages, called directly with scripted backends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator

import pytest

from app.stages import AssemblePrompt, Generate, Generated, GenerateEvent, StageThreads
from inference import (
    AssembledPrompt,
    BackendUnavailable,
    GenerationFailed,
    RouteDecision,
    TextDelta,
)
from tests.fakes.backends import ScriptedBackend, SimulatedBackend
from tests.fakes.passages import Doc
from tracing.budget import CostModel


def later(seconds: float = 5.0) -> float:
    return time.perf_counter() + seconds


async def assembled(backend: ScriptedBackend) -> AssembledPrompt:
    stage = AssemblePrompt(
        backend,
        StageThreads("assemble", 1, costs=CostModel()),
        context_tokens=64,
        layout="shared_prefix_first",
    )
    await stage.warm_up()
    result = await stage.assemble_prompt(
        "What is a list?", [Doc("A list holds items.")], context_tokens=64, deadline=later()
    )
    return result.prompt


async def collect(events: AsyncGenerator[GenerateEvent, None]) -> tuple[list[str], Generated]:
    texts: list[str] = []
    async for event in events:
        if isinstance(event, Generated):
            return texts, event
        if isinstance(event, TextDelta):
            texts.append(event.text)
    raise AssertionError("the stream ended without its Generated")


async def test_assemble_is_not_ready_before_warm_up_and_counts_the_shared_prefix() -> None:
    stage = AssemblePrompt(
        ScriptedBackend(),
        StageThreads("assemble", 1, costs=CostModel()),
        context_tokens=64,
        layout="shared_prefix_first",
    )
    assert not stage.ready
    with pytest.raises(BackendUnavailable):
        await stage.assemble_prompt("q", [], context_tokens=64, deadline=later())
    await stage.warm_up()
    assert stage.ready
    assert stage.shared_prefix_tokens and stage.shared_prefix_tokens > 10


async def test_assemble_packs_the_passages_within_the_context_budget() -> None:
    stage = AssemblePrompt(
        ScriptedBackend(),
        StageThreads("assemble", 1, costs=CostModel()),
        context_tokens=64,
        layout="shared_prefix_first",
    )
    await stage.warm_up()
    docs = [Doc("word " * 40), Doc("other " * 40), Doc("third " * 40)]
    result = await stage.assemble_prompt("What?", docs, context_tokens=60, deadline=later())
    assert result.prompt.context_tokens_used <= 60
    attributes = result.attributes()
    assert attributes["ragtime.prompt.context_tokens_budget"] == 60
    assert attributes["ragtime.prompt.dropped"] == 3 - len(result.prompt.passages)


async def test_generate_streams_the_text_then_how_it_ended() -> None:
    backend = ScriptedBackend(("An", " answer", " [1]."))
    stage = Generate(backend, temperature=0.0)
    texts, done = await collect(
        stage.generate_answer(await assembled(backend), max_tokens=16, target="t", deadline=later())
    )
    assert "".join(texts) == "An answer [1]."
    assert done.finish_reason == "stop" and done.target == "t"
    assert done.usage is not None and done.usage.completion_tokens == 3
    assert done.first_at is not None and done.first_at >= done.started


async def test_generate_stops_at_the_deadline() -> None:
    backend = ScriptedBackend(("one",) * 50, delay_s=0.02)
    stage = Generate(backend, temperature=0.0)
    texts, done = await collect(
        stage.generate_answer(
            await assembled(backend), max_tokens=50, target="t", deadline=later(0.3)
        )
    )
    assert done.finish_reason == "deadline"
    assert len(texts) < 50  # 50 pieces take 1 s
    assert backend.closed_streams == 1


@pytest.mark.parametrize(("waiting", "may_have_queued"), [(0, False), (1, True)])
async def test_an_answer_cut_short_says_its_prompt_and_whether_it_could_have_queued(
    waiting: int, may_have_queued: bool
) -> None:
    """What the budget needs to learn a cut answer's first token: the prompt's size (no usage
    comes), and whether the target was free when it was sent (else a queue may be in it)."""
    backend = SimulatedBackend(fixed_ms=0.0, prefill_ms_per_token=0.0, decode_ms_per_token=20.0)
    backend.waiting = waiting
    stage = Generate(backend, temperature=0.0)
    prompt = await assembled(ScriptedBackend(()))
    _, done = await collect(
        stage.generate_answer(prompt, max_tokens=50, target="t", deadline=later(0.3))
    )
    assert done.finish_reason == "deadline" and done.usage is None
    assert done.prompt_tokens == prompt.prompt_tokens > 0
    assert done.may_have_queued is may_have_queued


async def test_generate_yields_when_a_queued_request_needs_the_time() -> None:
    backend = ScriptedBackend(("one",) * 50, delay_s=0.02)
    stage = Generate(backend, temperature=0.0)
    stop = time.perf_counter() + 0.1
    texts, done = await collect(
        stage.generate_answer(
            await assembled(backend),
            max_tokens=50,
            target="t",
            deadline=later(),
            stop_at=lambda: stop,
        )
    )
    assert done.finish_reason == "yielded"
    assert 0 < len(texts) < 50


async def test_a_route_decision_changes_the_target_learned_under() -> None:
    backend = ScriptedBackend(
        route=RouteDecision("small@host", "small-model", degradation=("smaller_model", "x"))
    )
    events = [
        e
        async for e in Generate(backend, temperature=0.0).generate_answer(
            await assembled(backend), max_tokens=8, target="large@host", deadline=later()
        )
    ]
    assert isinstance(events[0], RouteDecision)
    done = events[-1]
    assert isinstance(done, Generated) and done.target == "small@host"


async def test_a_failure_before_the_first_text_is_unavailable_and_after_it_failed() -> None:
    before = ScriptedBackend(fail_after=0, fail_with=RuntimeError("connection reset"))
    with pytest.raises(BackendUnavailable, match="connection reset"):
        await collect(
            Generate(before, temperature=0.0).generate_answer(
                await assembled(before), max_tokens=8, target="t", deadline=later()
            )
        )
    after = ScriptedBackend(fail_after=1, fail_with=RuntimeError("decoder crashed"))
    with pytest.raises(GenerationFailed, match="mid-stream: decoder crashed"):
        await collect(
            Generate(after, temperature=0.0).generate_answer(
                await assembled(after), max_tokens=8, target="t", deadline=later()
            )
        )


async def test_closing_the_stream_early_closes_the_backend_stream() -> None:
    backend = ScriptedBackend(("one",) * 20, delay_s=0.01)
    events = Generate(backend, temperature=0.0).generate_answer(
        await assembled(backend), max_tokens=20, target="t", deadline=later()
    )
    assert isinstance(await anext(events), TextDelta)
    await events.aclose()
    await asyncio.sleep(0)
    assert backend.closed_streams == 1 and backend.yielded < 20
