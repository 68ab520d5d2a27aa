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

from bench.sglang_sim.model import EOS_ID, PrefixCache, detokenize, output_ids

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


@dataclass
class SimConfig:
    model: str = "fake/tiny-chat"
    ttft_s: float = 0.0
    """The fixed part of the time to first token, once a request runs."""
    prefill_s_per_token: float = 0.0
    """Added to the TTFT per prompt token not served from the prefix cache."""
    itl_s: float = 0.0
    """Decode time per token after the first."""
    natural_tokens: int = 12
    tokens_per_chunk: int = 1
    """The server's ``--stream-interval``: a request's ``sampling_params.stream_interval``
    overrides it (``_streams_now``)."""
    incremental: bool = False
    max_running: int = 64
    """The running batch (``--max-running-requests``, or what the memory allows); more wait."""
    queue_capacity: int | None = None
    """``--max-queued-requests``: waiting requests beyond it are aborted with 503."""
    context_length: int = 8192
    """The served context length (``--context-length``, or the model's)."""
    launch_args: bool = False
    """Whether ``--context-length`` and ``--max-running-requests`` were given at launch: only
    then does ``/server_info`` report them (else ``None``)."""
    abort_on_disconnect: bool = True
    """0.5.23: a client that closes its stream aborts its request. False: older releases."""
    healthy: bool = True
    has_ready: bool = True
    """Whether ``/ready`` exists (older servers: 404, only the slow ``/health``)."""
    health_s: float = 1.0
    """How long ``/health`` takes: it generates a token and waits at least 1 s."""
    start_together: int | None = None
    """Hold each running request before its prefill until this many run at once (or 30 s
    passed): a test's proof that a client sends that many at once, whatever the machine's
    speed."""
    missing_routes: tuple[str, ...] = ()
    """Paths answered 404, as by a release without them (``/v1/loads`` before 0.5)."""
    reject_status: int | None = None
    error_after: int | None = None
    """The stream breaks (the connection ends mid-body) after this many tokens."""
    stall_after: int | None = None
    server_abort_after: int | None = None
    server_abort_status: int = 503


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
        self._sem: asyncio.Semaphore | None = None
        self._waiting = 0
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
        self.config = SimConfig(**config)
        self._sem = None
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
        if self._sem is None:
            self._sem = asyncio.Semaphore(cfg.max_running)
        self._waiting += 1
        try:
            await self._sem.acquire()
        finally:
            self._waiting -= 1
        try:
            await self._run(state, cfg)
        finally:
            self._sem.release()
            self._active.pop(state.rid, None)
            self.cache.insert(state.input_ids + state.output)
            self.events.append(("finished", state.rid))
            await state.chunks.put(None)

    async def _run(self, state: ReqState, cfg: SimConfig) -> None:
        self._running += 1
        state.running = True
        self.peak_running = max(self.peak_running, self._running)
        if self._together is None:
            self._together = asyncio.Event()
        if cfg.start_together and self._running >= cfg.start_together:
            self._together.set()
        try:
            await self._run_one(state, cfg)
        finally:
            self._stop_running(state)

    def _stop_running(self, state: ReqState) -> None:
        """Take a request out of the running count, before its last output is streamed: the
        scheduler drops a finished request from its running batch
        (``managers/scheduler.py``, ``get_next_batch_to_run`` filters ``running_batch``) while
        that output still travels through the detokenizer and the tokenizer manager to the HTTP
        response, so a client that has read the end never finds it counted."""
        if state.running:
            state.running = False
            self._running -= 1

    async def _run_one(self, state: ReqState, cfg: SimConfig) -> None:
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
        prefill_s = cfg.prefill_s_per_token * (len(state.input_ids) - state.cached_tokens)
        if await _wait(state.aborted, cfg.ttft_s + prefill_s):
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
            if (i and await _wait(state.aborted, cfg.itl_s)) or state.aborted.is_set():
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

    def _abort(self, state: ReqState) -> None:
        if state.aborted.is_set() or state.rid not in self._active:
            return
        state.abort_requested_at = time.monotonic()
        state.stream_open_at_abort = state.rid in self._open_streams
        self.events.append(("abort", state.rid))
        state.aborted.set()

    def _load(self) -> dict[str, Any]:
        """One data-parallel rank's entry of ``GET /v1/loads`` (``entrypoints/http_server.py``,
        ``managers/io_struct.py``); ``/get_load`` is gone in 0.5.23."""
        running = sum(1 for s in self._active.values() if s.started is not None)
        prompt = self.counters["prompt_tokens"]
        return {
            "dp_rank": 0,
            "num_running_reqs": running,
            "num_waiting_reqs": self._waiting,
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
