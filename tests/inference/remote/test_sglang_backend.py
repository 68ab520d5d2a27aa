"""The SGLang backend against the simulated SGLang server (bench/sglang_sim), which follows
upstream 0.5.23's source: no real SGLang engine runs here."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry import trace

from bench.sglang_sim.model import detokenize, output_ids
from bench.sglang_sim.scheduler import ReqState
from bench.sglang_sim.server import SimulatedSGLang
from inference import (
    AssembledPrompt,
    BackendBusy,
    BackendUnavailable,
    GenerationDone,
    GenerationFailed,
    GenerationRejected,
    HFTokenizer,
    InferenceError,
    PromptAssembler,
    RemoteOptions,
    RouteDecision,
    SGLangBackend,
    TextDelta,
)
from tests.fakes._serve import ServerThread, refused_url
from tests.fakes.passages import Doc

PASSAGES = [Doc("Lists are mutable sequences."), Doc("Tuples are not mutable.", section="Tuples")]


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[SimulatedSGLang, SimulatedSGLang, str, str]]:
    a, b = SimulatedSGLang(), SimulatedSGLang()
    with ServerThread(a.app) as sa, ServerThread(b.app) as sb:
        yield a, b, sa.url, sb.url


@pytest.fixture
def fakes(
    servers: tuple[SimulatedSGLang, SimulatedSGLang, str, str],
) -> tuple[SimulatedSGLang, SimulatedSGLang, str, str]:
    servers[0].reset()
    servers[1].reset()
    return servers


@pytest.fixture
async def make_backend(tokenizer: HFTokenizer) -> AsyncIterator[Callable[..., SGLangBackend]]:
    made: list[SGLangBackend] = []

    def make(endpoints: list[str], **kwargs: Any) -> SGLangBackend:
        kwargs.setdefault("stall_timeout_s", 5.0)
        kwargs.setdefault("poll_interval_s", None)
        options = RemoteOptions(**kwargs)
        backend = SGLangBackend(
            endpoints, model="fake/tiny-chat", tokenizer=tokenizer, options=options
        )
        made.append(backend)
        return backend

    yield make
    for backend in made:
        await backend.close()


@pytest.fixture
async def backend(
    make_backend: Callable[..., SGLangBackend],
    fakes: tuple[SimulatedSGLang, SimulatedSGLang, str, str],
) -> AsyncIterator[SGLangBackend]:
    b = make_backend([fakes[2]])
    await b.start()
    yield b
    await b.close()


def prompt_for(tokenizer: HFTokenizer, question: str = "What is a list?") -> AssembledPrompt:
    return PromptAssembler(tokenizer, context_tokens=200).assemble(question, PASSAGES)


async def collect(
    backend: SGLangBackend, prompt: AssembledPrompt, max_tokens: int = 64
) -> tuple[list[str], GenerationDone]:
    deltas: list[str] = []
    done: GenerationDone | None = None
    async for event in backend.stream(prompt, max_tokens=max_tokens):
        if isinstance(event, RouteDecision):
            assert not deltas, "a route decision after the first delta"
        elif isinstance(event, TextDelta):
            assert done is None, "a delta after the final event"
            deltas.append(event.text)
        else:
            assert done is None
            done = event
    assert done is not None
    return deltas, done


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def only_state(fake: SimulatedSGLang) -> ReqState:
    (state,) = fake.states.values()
    return state


# -- streaming -----------------------------------------------------------------------------


@pytest.mark.parametrize("per_chunk", [1, 3])
async def test_cumulative_chunks_become_exact_deltas(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer, per_chunk: int
) -> None:
    fakes[0].reset(tokens_per_chunk=per_chunk, natural_tokens=12)
    prompt = prompt_for(tokenizer)
    deltas, done = await collect(backend, prompt)
    expected = detokenize(output_ids(prompt.token_ids, 12), final=True)
    assert "".join(deltas) == expected
    assert all(deltas)  # chunks that added no text (a held-back half character) yield nothing
    assert done.finish_reason == "stop"
    assert done.usage.prompt_tokens == len(prompt.token_ids)
    assert done.usage.completion_tokens == 12
    assert done.usage.cached_tokens == 0


async def test_incremental_output_is_read_as_deltas(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    fakes[0].reset(incremental=True, tokens_per_chunk=2)
    backend = make_backend([fakes[2]], incremental=True)
    await backend.start()
    prompt = prompt_for(tokenizer)
    deltas, done = await collect(backend, prompt)
    assert "".join(deltas) == detokenize(output_ids(prompt.token_ids, 12), final=True)
    assert done.finish_reason == "stop"
    await backend.close()


async def test_a_cumulative_client_on_an_incremental_server_fails_loudly(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    fakes[0].reset(incremental=True)
    with pytest.raises(InferenceError, match="not cumulative"):
        await collect(backend, prompt_for(tokenizer))


async def test_request_carries_input_ids_rid_and_sampling_params(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    prompt = prompt_for(tokenizer)
    await collect(backend, prompt, max_tokens=5)
    await collect(backend, prompt, max_tokens=5)
    first, second = (r.body for r in fakes[0].generate_requests)
    assert first["input_ids"] == prompt.token_ids
    assert "text" not in first
    assert first["stream"] is True
    assert first["sampling_params"] == {"max_new_tokens": 5, "temperature": 0.0}
    assert "priority" not in first  # nor a stream interval: the server's own
    assert re.fullmatch(r"[0-9a-f]{32}", first["rid"]) and re.fullmatch(
        r"[0-9a-f]{32}", second["rid"]
    )
    assert first["rid"] != second["rid"]


async def test_length_finish_and_queue_time(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    fakes[0].reset(max_running=1, ttft_s=0.15)
    prompt = prompt_for(tokenizer)
    (_, first), (_, second) = await asyncio.gather(
        collect(backend, prompt, max_tokens=4), collect(backend, prompt, max_tokens=4)
    )
    assert first.finish_reason == second.finish_reason == "length"
    assert first.usage.completion_tokens == 4
    # One ran while the other waited for the single running slot.
    assert max(first.queue_ms, second.queue_ms) >= 100.0


@pytest.mark.parametrize("server_interval", [1, 3])
async def test_a_stream_interval_is_sent_and_the_first_token_still_comes_alone(
    make_backend: Callable[..., SGLangBackend],
    fakes: Any,
    tokenizer: HFTokenizer,
    server_interval: int,
) -> None:
    """``stream_interval=4``: SGLang streams the 1st token, then the 5th and the 9th (each
    chunk carrying what came since), then the finish; the request's value wins over the
    server's ``--stream-interval``. Twelve tokens come as four deltas instead of twelve."""
    fakes[0].reset(natural_tokens=12, tokens_per_chunk=server_interval)
    backend = make_backend([fakes[2]], stream_interval=4)
    await backend.start()
    prompt = prompt_for(tokenizer)
    deltas, done = await collect(backend, prompt)
    assert fakes[0].generate_requests[0].body["sampling_params"]["stream_interval"] == 4
    planned = output_ids(prompt.token_ids, 12)
    assert deltas[0] == detokenize(planned[:1])
    assert "".join(deltas) == detokenize(planned, final=True)
    assert len(deltas) == 4 and done.usage.completion_tokens == 12
    await backend.close()


async def test_cached_tokens_follow_the_shared_prefix(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    one = prompt_for(tokenizer, "What is a list?")
    two = prompt_for(tokenizer, "How do I use a tuple?")
    _, cold = await collect(backend, one, max_tokens=4)
    _, warm = await collect(backend, one, max_tokens=4)
    _, other = await collect(backend, two, max_tokens=4)
    assert cold.usage.cached_tokens == 0
    assert warm.usage.cached_tokens == len(one.token_ids) - 1  # the last token is recomputed
    shared = next(
        i for i, (a, b) in enumerate(zip(one.token_ids, two.token_ids, strict=False)) if a != b
    )
    assert 0 < shared < len(two.token_ids) - 1
    assert other.usage.cached_tokens == shared


async def test_traceparent_carries_the_callers_trace(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer, spans: Any
) -> None:
    prompt = prompt_for(tokenizer)
    with trace.get_tracer("test").start_as_current_span("caller") as span:
        events = backend.stream(prompt, max_tokens=2)
    await collect_events(events)  # consumed outside the span: the header was taken at the call
    header = fakes[0].generate_requests[0].headers["traceparent"]
    context = span.get_span_context()
    assert header.startswith(f"00-{context.trace_id:032x}-{context.span_id:016x}-")


async def collect_events(events: Any) -> list[Any]:
    return [e async for e in events]


# -- cancellation --------------------------------------------------------------------------


async def test_closing_the_stream_aborts_the_request_before_closing(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    fake = fakes[0]
    fake.reset(itl_s=0.02, natural_tokens=500)
    events = backend.stream(prompt_for(tokenizer), max_tokens=500)
    assert isinstance(await anext(events), RouteDecision)
    assert isinstance(await anext(events), TextDelta)
    assert isinstance(await anext(events), TextDelta)
    await events.aclose()
    state = only_state(fake)
    await wait_until(lambda: state.finish_reason is not None and state.stream_end is not None)
    (abort,) = fake.aborts
    assert abort.body == {"rid": state.rid}
    assert state.stream_open_at_abort is True
    assert fake.events.index(("abort", state.rid)) < fake.events.index(
        (f"stream_{state.stream_end}", state.rid)
    )
    assert state.finish_reason is not None and state.finish_reason["type"] == "abort"
    assert len(state.output) < 20  # decoding stopped, not run to 500 tokens


async def test_a_deadline_cancellation_aborts_the_request(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    fake = fakes[0]
    fake.reset(ttft_s=5.0)
    events = backend.stream(prompt_for(tokenizer), max_tokens=8)
    assert isinstance(await anext(events), RouteDecision)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(anext(events), 0.2)
    state = only_state(fake)
    await wait_until(lambda: state.finish_reason is not None)
    assert [a.body["rid"] for a in fake.aborts] == [state.rid]
    assert state.finish_reason is not None and state.finish_reason["type"] == "abort"
    assert state.output == []
    assert state.stream_open_at_abort is True  # aborted first, then the stream closed


async def test_a_request_left_at_its_deadline_does_not_wait_for_the_abort(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer's last event must not wait on the abort's round trip (issue 22: answers cut
    at their deadline arrived after it): the caller is free while the abort is still held
    back, and the abort, then the stream's close, follow on their own."""
    fake = fakes[0]
    fake.reset(itl_s=0.5, natural_tokens=500)
    held = asyncio.Event()
    send_abort = backend._abort

    async def held_abort(*args: Any) -> None:
        await held.wait()
        await send_abort(*args)

    monkeypatch.setattr(backend, "_abort", held_abort)
    events = backend.stream(prompt_for(tokenizer), max_tokens=500)
    assert isinstance(await anext(events), RouteDecision)
    assert isinstance(await anext(events), TextDelta)
    async with asyncio.timeout(10):  # (before the fix: held for ever behind the abort)
        with pytest.raises(TimeoutError):  # the deadline: the next token is not waited for
            async with asyncio.timeout(0.05):
                await anext(events)
        await events.aclose()  # returns with the abort still held back
    state = only_state(fake)
    assert fake.aborts == []
    held.set()
    await wait_until(lambda: state.finish_reason is not None and state.stream_end is not None)
    assert [a.body["rid"] for a in fake.aborts] == [state.rid]
    assert state.stream_open_at_abort is True  # still aborted first, then closed


async def test_abort_by_someone_else_is_reported_as_cancelled(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    fake = fakes[0]
    fake.reset(itl_s=0.02, natural_tokens=500)
    events = backend.stream(prompt_for(tokenizer), max_tokens=500)
    assert isinstance(await anext(events), RouteDecision)
    assert isinstance(await anext(events), TextDelta)
    rid = only_state(fake).rid
    async with httpx.AsyncClient() as client:  # an operator aborts it, by a prefix of its rid
        await client.post(f"{fakes[2]}/abort_request", json={"rid": rid[:8]})
    rest = [e async for e in events]
    assert isinstance(rest[-1], GenerationDone) and rest[-1].finish_reason == "cancelled"


async def test_an_abort_with_incremental_output_does_not_repeat_the_text(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    fake = fakes[0]
    fake.reset(incremental=True, itl_s=0.02, natural_tokens=500)
    backend = make_backend([fakes[2]], incremental=True)
    await backend.start()
    events = backend.stream(prompt_for(tokenizer), max_tokens=500)
    texts = [e.text async for e in _until_text(events)]
    state = only_state(fake)
    async with httpx.AsyncClient() as client:
        await client.post(f"{fakes[2]}/abort_request", json={"rid": state.rid})
    async for event in events:
        if isinstance(event, TextDelta):
            texts.append(event.text)
        elif isinstance(event, GenerationDone):
            assert event.finish_reason == "cancelled"
    # The abort chunk carried the full text so far: read as such, not appended again.
    assert "".join(texts) == detokenize(state.output, final=True)
    await backend.close()


async def _until_text(events: Any) -> Any:
    async for event in events:
        if isinstance(event, TextDelta):
            yield event
            return


# -- failures ------------------------------------------------------------------------------


async def test_503_is_retried_on_the_next_endpoint(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    a, b, url_a, url_b = fakes
    a.reset(reject_status=503)
    backend = make_backend([url_a, url_b])
    await backend.start()
    deltas, done = await collect(backend, prompt_for(tokenizer))
    assert deltas and done.finish_reason == "stop"
    assert len(a.generate_requests) == 1 and len(b.generate_requests) == 1
    assert a.generate_requests[0].body["rid"] != b.generate_requests[0].body["rid"]
    await backend.close()


async def test_a_full_queue_answers_503_and_the_next_endpoint_serves(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    a, b, url_a, url_b = fakes
    a.reset(max_running=1, queue_capacity=0, ttft_s=0.3)
    b.reset()
    busy = make_backend([url_a])
    backend = make_backend([url_a, url_b])
    await busy.start()
    await backend.start()
    first = asyncio.create_task(collect(busy, prompt_for(tokenizer), max_tokens=2))
    await wait_until(lambda: len(a.states) == 1)
    await wait_until(lambda: next(iter(a.states.values())).started is not None)
    _, done = await collect(backend, prompt_for(tokenizer), max_tokens=2)
    assert done.finish_reason == "length"
    assert len(b.generate_requests) == 1
    await first
    await busy.close()
    await backend.close()


async def test_connection_refused_goes_to_the_next_endpoint(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    dead, sock = refused_url()
    with sock:
        backend = make_backend([dead, fakes[2]])
        await backend.start()
        assert backend.loaded  # one healthy endpoint is enough
        _, done = await collect(backend, prompt_for(tokenizer))
        assert done.finish_reason == "stop"
        await backend.close()


async def test_all_endpoints_down_is_backend_unavailable(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    a, _, url_a, _ = fakes
    a.reset(reject_status=503)
    dead, sock = refused_url()
    with sock:
        backend = make_backend([url_a, dead], cooldown_s=0.0)  # the dead one is retried
        await backend.start()
        with pytest.raises(BackendUnavailable) as info:
            await collect(backend, prompt_for(tokenizer))
        assert "HTTP 503" in str(info.value) and "connection failed" in str(info.value)
        await backend.close()


async def test_a_client_error_is_not_retried(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    a, b, url_a, url_b = fakes
    a.reset(reject_status=400)
    backend = make_backend([url_a, url_b])
    await backend.start()
    with pytest.raises(GenerationRejected, match="HTTP 400"):
        await collect(backend, prompt_for(tokenizer))
    assert not b.generate_requests
    assert backend.states[url_a].up
    await backend.close()


async def test_a_stream_that_breaks_after_text_is_generation_failed(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    """Upstream sends no in-stream 500: a server failure ends the connection mid-body."""
    fakes[0].reset(error_after=3)
    events = backend.stream(prompt_for(tokenizer), max_tokens=32)
    got: list[Any] = []
    with pytest.raises(GenerationFailed, match=r"failed mid-stream.*incomplete"):
        async for event in events:
            got.append(event)
    assert isinstance(got[0], RouteDecision) and got[1:]
    assert all(isinstance(e, TextDelta) for e in got[1:])
    assert only_state(fakes[0]).stream_end == "broken"


async def test_a_stream_that_breaks_before_text_is_retried(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    a, b, url_a, url_b = fakes
    a.reset(error_after=0)
    backend = make_backend([url_a, url_b])
    await backend.start()
    _, done = await collect(backend, prompt_for(tokenizer))
    assert done.finish_reason == "stop" and len(b.generate_requests) == 1
    await backend.close()


async def test_a_stall_after_text_aborts_and_fails(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    fake = fakes[0]
    fake.reset(stall_after=2)
    backend = make_backend([fakes[2]], stall_timeout_s=0.3)
    await backend.start()
    started = time.perf_counter()
    with pytest.raises(GenerationFailed, match="stalled"):
        await collect(backend, prompt_for(tokenizer))
    assert time.perf_counter() - started < 3.0
    state = only_state(fake)
    await wait_until(lambda: state.finish_reason is not None)
    assert [a.body["rid"] for a in fake.aborts] == [state.rid]
    await backend.close()


async def test_a_stall_before_text_is_retried_then_unavailable(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    a, b, url_a, url_b = fakes
    a.reset(stall_after=0)
    b.reset(stall_after=0)
    backend = make_backend([url_a, url_b], stall_timeout_s=0.3)
    await backend.start()
    with pytest.raises(BackendUnavailable, match="stalled"):
        await collect(backend, prompt_for(tokenizer))
    assert len(a.aborts) == 1 and len(b.aborts) == 1
    await backend.close()


async def test_a_request_error_in_the_stream_is_rejected_not_retried_and_takes_nothing_out(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    a, b, url_a, url_b = fakes
    backend = make_backend([url_a, url_b])
    await backend.start()
    prompt = prompt_for(tokenizer)
    # The servers shrink their context below the prompt after the client read it: the request
    # goes out and SGLang answers 200, then an error event (400, retryable false).
    a.config.context_length = b.config.context_length = len(prompt.token_ids) - 1
    for _ in range(3):
        with pytest.raises(GenerationRejected, match="context length") as info:
            await collect(backend, prompt, max_tokens=64)
        assert info.value.status_code == 400
    # Each endpoint was asked once: its refusal named its context length, and a prompt that
    # does not fit it is no longer sent there. Never retried elsewhere, nothing taken out.
    assert len(a.generate_requests) == len(b.generate_requests) == 1
    assert backend.loaded and all(s.up for s in backend.states.values())
    assert backend.context_length == len(prompt.token_ids) - 1


async def test_a_context_length_named_in_a_refusal_is_learned_and_the_output_fitted(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    """A server (or a gateway) that did not tell its context length says it when it refuses:
    the same request is sent again, once, with its output capped to fit."""
    a, _, url_a, _ = fakes
    prompt = prompt_for(tokenizer)
    a.reset(context_length=len(prompt.token_ids) + 8, missing_routes=("/v1/models",))
    backend = make_backend([url_a])
    await backend.start()
    assert backend.context_length is None
    events = [e async for e in backend.stream(prompt, max_tokens=64)]
    decisions = [e for e in events if isinstance(e, RouteDecision)]
    assert [d.degradation is not None for d in decisions] == [False, True]
    assert isinstance(events[-1], GenerationDone) and events[-1].finish_reason == "length"
    sent = [r.body["sampling_params"]["max_new_tokens"] for r in a.generate_requests]
    assert sent == [64, 8] and backend.context_length == len(prompt.token_ids) + 8


async def test_an_abort_with_a_4xx_status_is_the_requests_fault(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    a, b, url_a, url_b = fakes
    a.reset(server_abort_after=0, server_abort_status=400)
    b.reset(server_abort_after=0, server_abort_status=400)
    backend = make_backend([url_a, url_b])
    await backend.start()
    with pytest.raises(GenerationRejected, match="aborted by the server"):
        await collect(backend, prompt_for(tokenizer))
    assert len(a.generate_requests) + len(b.generate_requests) == 1
    assert all(s.up for s in backend.states.values())


async def test_a_full_queue_on_a_stream_is_busy_then_backend_busy(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    a, b, url_a, url_b = fakes
    for fake in (a, b):
        fake.reset(max_running=1, queue_capacity=0, ttft_s=0.5)
    backend = make_backend([url_a, url_b])
    await backend.start()
    prompt = prompt_for(tokenizer)
    holders = [asyncio.create_task(collect(backend, prompt, max_tokens=2)) for _ in range(2)]
    await wait_until(lambda: all(len(f.states) == 1 for f in (a, b)))
    with pytest.raises(BackendBusy, match="queue is full") as info:
        await collect(backend, prompt, max_tokens=2)
    assert info.value.status_code == 503 and info.value.retry_after_s
    # Answered 200 with an abort chunk (scheduler.py::_abort_on_queued_limit), not HTTP 503.
    aborted = [s for f in (a, b) for s in f.states.values() if s.started is None]
    assert len(aborted) == 2
    assert all(s.finish_reason and s.finish_reason["status_code"] == 503 for s in aborted)
    assert {s.health.value for s in backend.states.values()} == {"busy"}
    await asyncio.gather(*holders)


async def test_the_context_length_is_read_and_the_output_capped_to_fit(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    prompt = prompt_for(tokenizer)
    fakes[0].reset(context_length=len(prompt.token_ids) + 20, natural_tokens=500)
    backend = make_backend([fakes[2]])
    await backend.start()
    assert backend.context_length == len(prompt.token_ids) + 20
    events = [e async for e in backend.stream(prompt, max_tokens=64)]
    decision = events[0]
    assert isinstance(decision, RouteDecision) and decision.target == fakes[2]
    assert decision.degradation is not None and decision.degradation[0] == "output_capped"
    assert "context length" in decision.degradation[1]
    sent = fakes[0].generate_requests[0].body["sampling_params"]["max_new_tokens"]
    assert len(prompt.token_ids) + sent == len(prompt.token_ids) + 20  # exactly fits: served
    assert isinstance(events[-1], GenerationDone) and events[-1].finish_reason == "length"
    # A prompt that leaves no room is refused here, without being sent.
    fakes[0].config.context_length = len(prompt.token_ids) + 2
    await backend.poll_once()
    backend.states[fakes[2]].joined = False
    await backend.poll_once()
    with pytest.raises(GenerationRejected, match="no room"):
        await collect(backend, prompt)
    assert len(fakes[0].generate_requests) == 1


async def test_polls_use_ready_and_read_loads_and_latency(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    fake, url = fakes[0], fakes[2]
    fake.reset(ttft_s=0.05, itl_s=0.01, natural_tokens=4, max_running=8, health_s=0.0)
    backend = make_backend([url])
    await backend.start()
    assert backend.cost_target() == url
    assert list(backend.probe_backends()) == [url]
    first = backend.target_load(url)
    assert first is not None and first.max_running == 8 and first.ttft_ms is None
    await collect(backend.probe_backends()[url], prompt_for(tokenizer))  # type: ignore[arg-type]
    await backend.poll_once()
    load = backend.target_load(url)
    assert load is not None and load.running == 0 and load.waiting == 0
    assert load.ttft_ms is not None and 40 < load.ttft_ms < 1000
    assert load.itl_ms is not None and 5 < load.itl_ms < 200
    await backend.poll_once()
    again = backend.target_load(url)
    assert again is not None and again.ttft_ms is None  # no new request since the last poll
    assert fake.health_calls == 0  # /ready answered: the slow /health is never asked


async def test_a_server_without_ready_is_probed_on_health_with_a_long_timeout(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    fakes[0].reset(has_ready=False, health_s=1.2)  # /health takes more than a second
    backend = make_backend([fakes[2]], connect_timeout_s=0.5)
    await backend.start()
    assert backend.loaded and backend.states[fakes[2]].up
    await backend.close()


async def test_an_abort_by_the_server_is_an_error(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    fakes[0].reset(server_abort_after=3)
    with pytest.raises(GenerationFailed, match="aborted by the server"):
        await collect(backend, prompt_for(tokenizer))


# -- lifecycle -----------------------------------------------------------------------------


async def test_unhealthy_server_leaves_it_unloaded_without_raising(
    make_backend: Callable[..., SGLangBackend], fakes: Any, tokenizer: HFTokenizer
) -> None:
    fakes[0].reset(healthy=False)
    backend = make_backend([fakes[2]])
    with pytest.raises(BackendUnavailable, match="not started"):
        await collect(backend, prompt_for(tokenizer))
    await backend.start()
    assert not backend.loaded
    fakes[0].config.healthy = True
    assert await backend.check_health() and backend.loaded
    await backend.close()
    assert not backend.loaded


async def test_the_fake_reports_load_and_sglang_metrics(
    backend: SGLangBackend, fakes: Any, tokenizer: HFTokenizer
) -> None:
    prompt = prompt_for(tokenizer)
    await collect(backend, prompt, max_tokens=3)
    await collect(backend, prompt, max_tokens=3)
    async with httpx.AsyncClient(base_url=fakes[2]) as client:
        loads = (await client.get("/v1/loads", params={"include": "core,queues"})).json()
        metrics = (await client.get("/metrics")).text
    (load,) = loads["loads"]
    assert load["num_running_reqs"] == 0 and load["num_waiting_reqs"] == 0
    assert 0.4 < load["cache_hit_rate"] < 0.5
    for name in ("num_running_reqs", "num_queue_reqs", "cache_hit_rate", "prompt_tokens_total",
                 "cached_tokens_total", "time_to_first_token_seconds_bucket"):  # fmt: skip
        assert f"sglang:{name}{{" in metrics
    assert re.search(r"sglang:generation_tokens_total\{[^}]*\} 6\.0", metrics)


# -- what 0.5.23 tells, and where ----------------------------------------------------------


async def test_the_simulated_server_tells_each_fact_only_where_upstream_does(
    fakes: Any,
) -> None:
    fakes[0].reset(max_running=64, context_length=4096)
    async with httpx.AsyncClient(base_url=fakes[2]) as client:
        model_info = (await client.get("/model_info")).json()
        server_info = (await client.get("/server_info")).json()
        models = (await client.get("/v1/models")).json()
        (load,) = (await client.get("/v1/loads")).json()["loads"]
        assert (await client.get("/get_load")).status_code == 404  # gone in 0.5.23
    assert "context_length" not in model_info and model_info["is_generation"] is True
    assert server_info["context_length"] is None and server_info["max_running_requests"] is None
    assert server_info["internal_states"][0]["effective_max_running_requests_per_dp"] == 64
    assert models["data"][0]["max_model_len"] == 4096
    assert load["max_running_requests"] == 64


async def test_a_64_slot_server_with_a_4096_context_is_read_as_such(
    make_backend: Callable[..., SGLangBackend], fakes: Any
) -> None:
    fakes[0].reset(max_running=64, context_length=4096, health_s=0.0)
    backend = make_backend([fakes[2]])
    await backend.start()
    state = backend.states[fakes[2]]
    assert state.kind == "server" and state.context_length == 4096
    load = backend.target_load(fakes[2])
    assert load is not None and load.max_running == 64


async def test_what_a_server_does_not_tell_is_what_the_operator_configured(
    make_backend: Callable[..., SGLangBackend], fakes: Any
) -> None:
    """An older server (no /v1/loads, no max_model_len): the configured fallbacks stand."""
    fakes[0].reset(max_running=16, missing_routes=("/v1/models", "/v1/loads", "/server_info"))
    backend = make_backend([fakes[2]], context_length=2048, max_running=12)
    await backend.start()
    state = backend.states[fakes[2]]
    assert state.up and state.context_length == 2048
    load = backend.target_load(fakes[2])
    assert load is not None and load.max_running == 12


async def test_a_contract_error_is_http_400_before_any_streaming(fakes: Any) -> None:
    """generate_contract_error: an unknown sampling key or a priority of the wrong type."""
    bodies = [
        {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 2, "typo": 1}, "stream": True},
        {"input_ids": [1, 2], "sampling_params": {"max_new_tokens": 2}, "priority": "high",
         "stream": True},
    ]  # fmt: skip
    async with httpx.AsyncClient(base_url=fakes[2]) as client:
        for body in bodies:
            response = await client.post("/generate", json=body)
            assert response.status_code == 400
            assert isinstance(response.json()["error"], str)
    assert not fakes[0].states  # nothing was run


async def test_prompt_plus_output_over_the_context_is_an_error_in_the_stream(
    fakes: Any,
) -> None:
    """Exactly the context length is served; one token more is a ValueError, in the stream."""
    fakes[0].reset(context_length=10, natural_tokens=100)
    body: dict[str, Any] = {"input_ids": [5] * 6, "stream": True}
    async with httpx.AsyncClient(base_url=fakes[2]) as client:
        body["sampling_params"] = {"max_new_tokens": 4}
        fits = await client.post("/generate", json=body)
        body["sampling_params"] = {"max_new_tokens": 5}
        over = await client.post("/generate", json=body)
    assert fits.status_code == over.status_code == 200
    assert '"length"' in fits.text and "error" not in fits.text
    assert '"retryable": false' in over.text and '"code": 400' in over.text


async def test_a_client_that_closes_its_stream_stops_the_decoding(
    fakes: Any,
) -> None:
    """0.5.23 releases a request whose client went away, /abort_request or not."""
    fake = fakes[0]
    fake.reset(itl_s=0.02, natural_tokens=1000)
    body = {"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 1000}, "stream": True}
    async with (
        httpx.AsyncClient(base_url=fakes[2]) as client,
        client.stream("POST", "/generate", json=body) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                break
    await wait_until(lambda: only_state(fake).finish_reason is not None)
    state = only_state(fake)
    assert state.finish_reason is not None and state.finish_reason["type"] == "abort"
    assert not fake.aborts and len(state.output) < 200
