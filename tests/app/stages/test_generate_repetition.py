"""The generate stage against answers that loop or start a new turn, and the penalties it sends
with every request, called directly with scripted backends; then through the app."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.stages import AssemblePrompt, Generate, Generated, GenerateEvent, StageThreads
from inference import (
    AssembledPrompt,
    GenerationBackend,
    GenerationEvent,
    NullBackend,
    Penalties,
    TextDelta,
    Urgency,
)
from inference.backend import SERVER_PENALTIES
from tests.fakes.backends import ScriptedBackend
from tests.fakes.passages import Doc
from tests.helpers.app import running_app
from tests.helpers.spans import text
from tracing.budget import CostModel

LOOP = "The default is evaluated once, when the function is defined. "
LOOPING = [" " + word for word in (LOOP * 8).split()]


def later(seconds: float = 5.0) -> float:
    return time.perf_counter() + seconds


async def assembled(backend: GenerationBackend) -> AssembledPrompt:
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


async def answer(
    stage: Generate,
    *,
    deadline: float | None = None,
    max_tokens: int = 200,
    span: trace.Span | None = None,
) -> tuple[str, Generated]:
    """The stage's text, and how it ended."""
    events: AsyncGenerator[GenerateEvent, None] = stage.generate_answer(
        await assembled(stage.backend),
        max_tokens=max_tokens,
        target="t",
        deadline=deadline or later(),
        span=span,
    )
    texts: list[str] = []
    async for event in events:
        if isinstance(event, Generated):
            return "".join(texts), event
        if isinstance(event, TextDelta):
            texts.append(event.text)
    raise AssertionError("the stream ended without its Generated")


async def test_a_loop_ends_the_answer_without_its_third_turn_and_stops_decoding(
    spans: InMemorySpanExporter,
) -> None:
    backend = ScriptedBackend(LOOPING)
    with trace.get_tracer(__name__).start_as_current_span("generate") as span:
        text_sent, generated = await answer(Generate(backend, temperature=0.0), span=span)
    assert text_sent.strip() == (LOOP * 2).strip()
    assert generated.finish_reason == "stop" and generated.stopped_on == "repetition"
    assert backend.closed_streams == 1 and backend.yielded < len(LOOPING)  # decoding stopped
    # Read: two turns, the third's first 8 words, and the piece whose space ended the 8th.
    assert generated.usage is None and generated.streamed_tokens == 2 * len(LOOP.split()) + 9
    assert generated.prompt_tokens > 0 and generated.last_at is not None
    [exported] = spans.get_finished_spans()
    assert text(exported, "ragtime.generate.stopped_on") == "repetition"


async def test_a_new_question_ends_the_answer_before_its_line() -> None:
    deltas = [" Use", " None", " [1].", "\n\n", "Question", ":", " And", " a", " dict?"]
    backend = ScriptedBackend(deltas)
    text_sent, generated = await answer(Generate(backend, temperature=0.0))
    assert text_sent == " Use None [1]."
    assert generated.finish_reason == "stop" and generated.stopped_on == "turn"
    assert backend.closed_streams == 1 and backend.yielded < len(deltas)


async def test_with_the_stop_off_the_loop_runs_to_the_cap() -> None:
    backend = ScriptedBackend(LOOPING)
    stage = Generate(backend, temperature=0.0, stop_on_repetition=False)
    text_sent, generated = await answer(stage, max_tokens=len(LOOPING))
    assert text_sent == "".join(LOOPING)
    assert generated.finish_reason == "stop" and generated.stopped_on is None
    assert generated.usage is not None


async def test_filler_is_not_watched() -> None:
    """The null backend's "ok ok ok ..." is a bench's filler, not a model in a loop."""
    backend = NullBackend(tokens=40)
    text_sent, generated = await answer(Generate(backend, temperature=0.0))
    assert text_sent == "ok " * 40 and generated.stopped_on is None


async def test_what_was_held_goes_out_when_the_answer_ends() -> None:
    backend = ScriptedBackend([" It", " is.", "\n", "Q"])  # "Q" may have been a "Q:"
    text_sent, generated = await answer(Generate(backend, temperature=0.0))
    assert text_sent == " It is.\nQ" and generated.stopped_on is None


class StallsAfter(ScriptedBackend):
    """Streams its deltas, then waits for ever: the deadline ends the answer."""

    async def _generate(
        self,
        prompt: AssembledPrompt,
        *,
        max_tokens: int,
        temperature: float,
        deadline: float | None,
        target: str | None,
        urgency: Urgency | None = None,
        penalties: Penalties = SERVER_PENALTIES,
    ) -> AsyncGenerator[GenerationEvent, None]:
        for delta in self.deltas:
            yield TextDelta(delta)
        await asyncio.Event().wait()


async def test_what_was_held_goes_out_when_the_deadline_comes() -> None:
    backend = StallsAfter([" It", " is.", "\n", "Q"])
    text_sent, generated = await answer(Generate(backend, temperature=0.0), deadline=later(0.3))
    assert text_sent == " It is.\nQ" and generated.finish_reason == "deadline"


async def test_the_penalties_go_with_every_request() -> None:
    backend = ScriptedBackend()
    asked = Penalties(repeat=1.3, frequency=0.2)
    await answer(Generate(backend, temperature=0.0, penalties=asked))
    await answer(Generate(backend, temperature=0.0))
    assert backend.penalties == [asked, Penalties()]
    attributes = Generate(backend, temperature=0.0, penalties=asked).span_attributes(8)
    assert attributes["ragtime.request.repeat_penalty"] == 1.3
    assert attributes["gen_ai.request.frequency_penalty"] == 0.2
    assert "gen_ai.request.presence_penalty" not in attributes


def test_the_settings_reach_the_backend_through_the_app(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    backend = ScriptedBackend(LOOPING)
    with running_app(
        seeded_data_dir, backend=backend, repeat_penalty=1.2, presence_penalty=0.5
    ) as client:
        response = client.post("/v1/ask", json={"question": "What is a list?"}, headers=auth)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answer"].strip() == (LOOP * 2).strip() and body["finish_reason"] == "stop"
    assert backend.penalties[-1] == Penalties(repeat=1.2, presence=0.5)
