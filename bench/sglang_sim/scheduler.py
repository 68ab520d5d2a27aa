"""The simulated SGLang server's scheduler: the waiting queue, the running batch, GPU-like
timings, decoding token by token, and how a request finishes.

It follows SGLang 0.5.23's scheduler (under ``python/sglang/srt/`` of sgl-project/sglang, as
``server`` names each file for the HTTP side):

- Decoding runs in a task of its own, as in SGLang's scheduler. ``/abort_request`` stops it,
  matching rids by prefix. So does a client that closes its stream: on 0.5.23 the request's
  state is released when its response fails (``tokenizer_manager.py::generate_request``);
  ``abort_on_disconnect=False`` models older releases, which decode on (upstream issue 36333).
- ``cached_tokens`` comes from a trie of the token ids of finished requests (at most
  ``prompt_tokens - 1``: the last prompt token is always computed).
- Chunks carry cumulative ``text`` and ``output_ids`` (incremental with ``incremental=True``,
  ``--incremental-streaming-output``), every one with ``meta_info``. The finish reason is
  ``{"type": "stop", "matched": EOS}`` after ``natural_tokens``, ``{"type": "length",
  "length": N}`` at ``max_new_tokens``, or ``{"type": "abort", ...}``. A chunk goes for every
  token, or with a stream interval N above 1 (the server's ``tokens_per_chunk``, a request's
  ``sampling_params.stream_interval`` before it) for the 1st token and every Nth after
  (``managers/scheduler_output_processor_mixin.py``).

GPU-like timing: at most ``max_running`` requests decode at once, the rest wait (the wait counts
in their TTFT, as SGLang's does); a request's first token comes ``ttft_s`` plus
``prefill_s_per_token`` per uncached prompt token after it starts, each next one ``itl_s``
later.

Fail modes, each off by default: ``error_after`` (the stream breaks after N tokens),
``stall_after`` (silence after N tokens until aborted), ``server_abort_after`` (the server
aborts the request, with a ``status_code``); ``reject_status`` is the HTTP side's. ``states``
holds each rid's fate.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from bench.sglang_sim.config import SimConfig
from bench.sglang_sim.model import EOS_ID, PrefixCache, detokenize, output_ids
from bench.sglang_sim.queueing import Batch, Order, Turn

QUEUE_FULL = "The request queue is full."
#: A marker in a request's chunk queue: break the stream here.
BREAK = b"<break>"


@dataclass
class ReqState:
    """One ``/generate`` request's life inside the fake."""

    rid: str
    input_ids: list[int]
    max_new_tokens: int
    stream: bool
    stream_interval: int | None = None
    """``sampling_params.stream_interval``: overrides the server's (``tokens_per_chunk``)."""
    arrived: float = field(default_factory=time.monotonic)
    output: list[int] = field(default_factory=list)
    cached_tokens: int = 0
    finish_reason: dict[str, Any] | None = None
    aborted: asyncio.Event = field(default_factory=asyncio.Event)
    abort_requested_at: float | None = None
    stream_open_at_abort: bool | None = None
    stream_end: str | None = None
    """``"complete"`` (sent to its end) or ``"disconnected"`` (the client went away first)."""
    chunks: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    started: float | None = None
    queue_s: float = 0.0
    text_sent: str = ""
    ids_sent: int = 0
    running: bool = False
    """Counted among the running requests (``num_running_reqs``)."""
    priority: int | None = None
    interrupt: asyncio.Event = field(default_factory=asyncio.Event)
    """Set on an abort, and when a preferred request takes its slot (``queueing``)."""
    abort_as: dict[str, Any] | None = None
    """The finish reason of an abort the server decided (a full queue's eviction)."""


class SimulatedScheduler:
    """The requests' state and the scheduler's loop; ``SimulatedSGLang`` serves it over HTTP."""

    def __init__(self) -> None:
        self.config = SimConfig()
        self.cache = PrefixCache()
        self.states: dict[str, ReqState] = {}
        self.events: list[tuple[str, str]] = []
        self._active: dict[str, ReqState] = {}
        self._open_streams: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.batch = Batch(Order(), self._preempted)
        self._running = 0
        self.peak_running = 0
        """The most requests that ran at once since the last ``reset``."""
        self._together: asyncio.Event | None = None
        self.counters = dict.fromkeys(
            ("prompt_tokens", "generation_tokens", "cached_tokens", "num_aborted_requests"), 0
        )
        self.histograms: dict[str, list[float]] = {
            "time_to_first_token_seconds": [],
            "inter_token_latency_seconds": [],
            "e2e_request_latency_seconds": [],
            "queue_time_seconds": [],
        }

    def reset(self, **config: Any) -> None:
        """Forget every request and cache entry; apply ``config`` over the defaults."""
        self.config = cfg = SimConfig(**config)
        self.batch = Batch(
            Order(
                max_running=cfg.max_running,
                priority_scheduling=cfg.priority_scheduling,
                low_values_first=cfg.low_priority_values_first,
                preemption=cfg.priority_preemption,
                preemption_threshold=cfg.preemption_threshold,
            ),
            self._preempted,
        )
        self.cache.clear()
        self.counters = dict.fromkeys(self.counters, 0)
        self.histograms = {name: [] for name in self.histograms}
        self.states.clear()
        self.events.clear()
        self.peak_running = 0
        self._together = None

    def _submit(self, state: ReqState) -> asyncio.Task[None]:
        """Queue a request to run; its task decodes it (``_decode``)."""
        self._active[state.rid] = state
        task = asyncio.create_task(self._decode(state))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _decode(self, state: ReqState) -> None:
        """The scheduler's part: queue, prefill, decode token by token, until done or aborted."""
        cfg = self.config
        turn = self.batch.join(state.rid, state.priority)
        try:
            if await self._await_turn(state, turn):
                await self._run(state, cfg, turn)
            else:  # aborted in the waiting queue: it leaves the queue at once
                await self._finish(state, state.abort_as or abort_reason("Abort in waiting queue"))
        finally:
            self.batch.leave(turn)
            self._active.pop(state.rid, None)
            self.cache.insert(state.input_ids + state.output)
            self.events.append(("finished", state.rid))
            await state.chunks.put(None)

    async def _await_turn(self, state: ReqState, turn: Turn) -> bool:
        """Wait for a slot of the running batch; False when aborted first."""
        if not turn.admitted.is_set() and not state.aborted.is_set():
            waits = [asyncio.ensure_future(e.wait()) for e in (turn.admitted, state.aborted)]
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for waiting in waits:
                waiting.cancel()
        return not state.aborted.is_set()

    async def _run(self, state: ReqState, cfg: SimConfig, turn: Turn) -> None:
        self._start_running(state)
        if self._together is None:
            self._together = asyncio.Event()
        if cfg.start_together and self._running >= cfg.start_together:
            self._together.set()
        try:
            await self._run_one(state, cfg, turn)
        finally:
            self._stop_running(state)

    def _start_running(self, state: ReqState) -> None:
        self._running += 1
        state.running = True
        self.peak_running = max(self.peak_running, self._running)

    def _stop_running(self, state: ReqState) -> None:
        """Take a request out of the running count, before its last output is streamed: the
        scheduler drops a finished request from its running batch
        (``managers/scheduler.py``, ``get_next_batch_to_run`` filters ``running_batch``) while
        that output still travels through the detokenizer and the tokenizer manager to the HTTP
        response, so a client that has read the end never finds it counted."""
        if state.running:
            state.running = False
            self._running -= 1

    def _pace(self) -> float:
        """How much slower than configured the engine runs now (``slow_factor``)."""
        return self.config.slow_factor

    def _prefill_s(self, state: ReqState, cfg: SimConfig) -> float:
        """The time to the next token once running: the fixed part, and the prompt (with what
        was generated before a preemption) less what the prefix cache holds."""
        ids = state.input_ids + state.output
        cached = min(self.cache.match(ids), len(ids) - 1)
        return (cfg.ttft_s + cfg.prefill_s_per_token * (len(ids) - cached)) * self._pace()

    async def _spend(self, state: ReqState, turn: Turn, seconds: float) -> bool:
        """Spend ``seconds`` of engine time on ``state``; True when it was aborted meanwhile. A
        request preempted meanwhile waits for a slot again, then is prefilled again (its prompt
        and what it generated so far, as ``Req`` keeps its ``output_ids``)."""
        while await _wait(state.interrupt, seconds):
            if state.aborted.is_set():
                return True
            state.interrupt.clear()  # preempted: out of the batch until its turn comes back
            self._stop_running(state)
            self.events.append(("preempted", state.rid))
            if not await self._await_turn(state, turn):
                return True
            self._start_running(state)
            seconds = self._prefill_s(state, self.config)
        return False

    async def _run_one(self, state: ReqState, cfg: SimConfig, turn: Turn) -> None:
        state.started = time.monotonic()
        state.queue_s = state.started - state.arrived
        self.histograms["queue_time_seconds"].append(state.queue_s)
        if cfg.start_together and self._together is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._together.wait(), 30.0)
        if state.aborted.is_set():
            return await self._finish(state, abort_reason("Abort in waiting queue"))
        state.cached_tokens = min(self.cache.match(state.input_ids), len(state.input_ids) - 1)
        self.counters["prompt_tokens"] += len(state.input_ids)
        self.counters["cached_tokens"] += state.cached_tokens
        if await self._spend(state, turn, self._prefill_s(state, cfg)):
            return await self._finish(state, abort_reason("Abort before prefill"))
        planned = output_ids(state.input_ids, state.max_new_tokens)
        last_token_at = time.monotonic()
        for i, token in enumerate(planned):
            if i == cfg.error_after:
                return await self._break(state, "CUDA out of memory.")
            if i == cfg.stall_after:
                await _wait(state.aborted, 30.0)  # silence, until aborted (or 30 s)
                return await self._finish(state, abort_reason("Unknown error"))
            if i == cfg.server_abort_after:
                status = cfg.server_abort_status
                return await self._finish(
                    state, abort_reason("Aborted by the server.", status_code=status)
                )
            if i == cfg.natural_tokens:
                return await self._finish(state, {"type": "stop", "matched": EOS_ID})
            if (i and await self._spend(state, turn, cfg.itl_s * self._pace())) or (
                state.aborted.is_set()
            ):
                return await self._finish(state, abort_reason("Unknown error"))
            now = time.monotonic()
            key = "time_to_first_token_seconds" if i == 0 else "inter_token_latency_seconds"
            self.histograms[key].append(now - (state.arrived if i == 0 else last_token_at))
            last_token_at = now
            state.output.append(token)
            self.counters["generation_tokens"] += 1
            interval = state.stream_interval or cfg.tokens_per_chunk
            if i + 1 < len(planned) and _streams_now(len(state.output), interval):
                await self._emit(state, None)
        await self._finish(state, {"type": "length", "length": state.max_new_tokens})

    async def _finish(self, state: ReqState, reason: dict[str, Any]) -> None:
        self._stop_running(state)
        state.finish_reason = reason
        if reason["type"] == "abort":
            self.counters["num_aborted_requests"] += 1
        self.histograms["e2e_request_latency_seconds"].append(time.monotonic() - state.arrived)
        await self._emit(state, reason)
        await state.chunks.put(b"data: [DONE]\n\n")

    async def _emit(self, state: ReqState, reason: dict[str, Any] | None) -> None:
        """Queue one chunk: the text so far (or its new part), ``meta_info`` always."""
        chunk = self._chunk(state, reason)
        await state.chunks.put(b"data: " + json.dumps(chunk).encode() + b"\n\n")

    def _chunk(self, state: ReqState, reason: dict[str, Any] | None) -> dict[str, Any]:
        text = detokenize(state.output, final=reason is not None)
        meta: dict[str, Any] = {
            "id": state.rid,
            "finish_reason": reason,
            "prompt_tokens": len(state.input_ids),
            "completion_tokens": len(state.output),
            "cached_tokens": state.cached_tokens,
            "cached_tokens_details": None,
        }
        if reason is not None:
            meta["e2e_latency"] = time.monotonic() - state.arrived
            meta["queue_time"] = state.queue_s
        # managers/tokenizer_manager.py: with --incremental-streaming-output each chunk has the
        # new text only, except an abort's, which still carries the full text so far.
        incremental = self.config.incremental and not (reason and reason["type"] == "abort")
        ids = state.output[state.ids_sent :] if incremental else state.output
        chunk = {
            "text": text[len(state.text_sent) :] if incremental else text,
            "output_ids": list(ids),
            "meta_info": meta,
        }
        state.text_sent, state.ids_sent = text, len(state.output)
        return chunk

    async def _break(self, state: ReqState, message: str) -> None:
        """An exception other than a request's ``ValueError``: upstream sends no error event
        for it; the response fails and its connection ends without the last chunk."""
        state.finish_reason = {"type": "error", "message": message}
        await state.chunks.put(BREAK)

    def _abort(self, state: ReqState, reason: dict[str, Any] | None = None) -> None:
        if state.aborted.is_set() or state.rid not in self._active:
            return
        state.abort_requested_at = time.monotonic()
        state.stream_open_at_abort = state.rid in self._open_streams
        self.events.append(("abort", state.rid))
        state.abort_as = reason
        state.aborted.set()
        state.interrupt.set()

    def _preempted(self, turn: Turn) -> None:
        """A preferred request took ``turn``'s slot: its decode stops at once (``_spend``)."""
        state = self._active.get(turn.rid)
        if state is not None:
            state.interrupt.set()

    def _load(self) -> dict[str, Any]:
        """One data-parallel rank's entry of ``GET /v1/loads`` (``entrypoints/http_server.py``,
        ``managers/io_struct.py``); ``/get_load`` is gone in 0.5.23."""
        running = sum(1 for s in self._active.values() if s.running)
        prompt = self.counters["prompt_tokens"]
        return {
            "dp_rank": 0,
            "num_running_reqs": running,
            "num_waiting_reqs": len(self.batch.waiting),
            "num_total_reqs": len(self._active),
            "num_used_tokens": sum(len(s.input_ids) + len(s.output) for s in self._active.values()),
            "max_total_num_tokens": self.config.context_length * self.config.max_running,
            "max_running_requests": self.config.max_running,
            "token_usage": 0.0,
            "cache_hit_rate": self.counters["cached_tokens"] / prompt if prompt else 0.0,
        }


def _streams_now(tokens: int, interval: int) -> bool:
    """Whether a stream sends a chunk once it holds ``tokens`` tokens (its finish is always
    sent): ``managers/scheduler_output_processor_mixin.py::stream_output_generation``, where the
    interval is ``req.sampling_params.stream_interval or self.stream_interval`` and, above 1, a
    chunk goes at the 1st token, then at the (1 + k x interval)th: the first token is never
    held back."""
    return tokens % interval == 1 if interval > 1 else True


def abort_reason(message: str, *, status_code: int | None = None) -> dict[str, Any]:
    return {"type": "abort", "message": message, "status_code": status_code, "err_type": None}


async def _wait(event: asyncio.Event, timeout_s: float) -> bool:
    """Sleep ``timeout_s`` unless ``event`` is set first; True when it was set."""
    if event.is_set():
        return True
    if timeout_s <= 0:
        await asyncio.sleep(0)
        return event.is_set()
    try:
        await asyncio.wait_for(event.wait(), timeout_s)
    except TimeoutError:
        return False
    return True
