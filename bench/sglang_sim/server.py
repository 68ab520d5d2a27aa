r"""A server that speaks SGLang 0.5.23's native HTTP API, with GPU-like timings and no GPU.

It stands in for an SGLang engine where none can run: ragtime's tests talk to it (directly and
through SGLang's real gateway), and a bench plans capacity against it (``python -m
bench.sglang_sim``, ``ragtime bench budget --fake-sglang SPEC``). It is a claim about another
system, so each behaviour names the upstream file (under ``python/sglang/srt/`` of
sgl-project/sglang 0.5.23) it follows; the facts are those of ``shared/reference/
sglang-protocol.md``, read from that source.

``POST /generate`` (``entrypoints/http_server.py``):

- A body that breaks the request contract (an unknown ``sampling_params`` key, a value of the
  wrong type such as a string ``priority``) is an HTTP 400 ``{"error": "<string>"}`` **before**
  any streaming (``generate_contract_error``, ``api/v1/api_types.py``).
- Otherwise a streamed request is answered 200 before it is validated, so the ``ValueError``\s of
  ``managers/tokenizer_manager.py::_validate_one_request`` (no input, prompt plus
  ``max_new_tokens`` over the context length (``>``: exactly the context length is served), a
  duplicate rid, ``max_new_tokens`` below 0) come in the stream as ``{"error": {"message",
  "type", "code": 400, "retryable": false}}``, then ``data: [DONE]``
  (``serve_generate_request``). Without ``stream`` they are an HTTP 400.
- Upstream sends no in-stream 500: any other exception breaks the stream (the connection ends
  without its last chunk). ``error_after`` does that.
- Chunks carry cumulative ``text`` and ``output_ids`` (incremental with ``incremental=True``,
  ``--incremental-streaming-output``), every one with ``meta_info``. The finish reason is
  ``{"type": "stop", "matched": EOS}`` after ``natural_tokens``, ``{"type": "length",
  "length": N}`` at ``max_new_tokens``, or ``{"type": "abort", ...}``. A chunk goes for every
  token, or with a stream interval N above 1 (the server's ``tokens_per_chunk``, a request's
  ``sampling_params.stream_interval`` before it) for the 1st token and every Nth after
  (``managers/scheduler_output_processor_mixin.py``).
- Decoding runs in a task of its own, as in SGLang's scheduler. ``/abort_request`` stops it,
  matching rids by prefix. So does a client that closes its stream: on 0.5.23 the request's
  state is released when its response fails (``tokenizer_manager.py::generate_request``);
  ``abort_on_disconnect=False`` models older releases, which decode on (upstream issue 36333).
- ``cached_tokens`` comes from a trie of the token ids of finished requests (at most
  ``prompt_tokens - 1``: the last prompt token is always computed).

What the server tells about itself, each fact only where upstream gives it:

- ``/model_info``: the model path and ``is_generation``; **no context length**.
- ``/server_info``: the launch arguments as given (``context_length`` and
  ``max_running_requests`` are ``None`` unless set at launch: ``launch_args=True``), and
  ``internal_states[]`` with ``effective_max_running_requests_per_dp``.
- ``GET /v1/models``: the served context length, ``max_model_len``.
- ``GET /v1/loads``: per data-parallel rank, ``num_running_reqs``, ``num_waiting_reqs`` and
  ``max_running_requests`` (``managers/load_snapshot.py``). ``/get_load`` is gone.
- ``/metrics``: the ``sglang:`` gauges, counters and histograms of ``metrics/collector.py``.

GPU-like timing: at most ``max_running`` requests decode at once, the rest wait (the wait counts
in their TTFT, as SGLang's does); a request's first token comes ``ttft_s`` plus
``prefill_s_per_token`` per uncached prompt token after it starts, each next one ``itl_s``
later.

Fail modes, each off by default: ``reject_status`` (an HTTP status before streaming, as a proxy
in front would), ``error_after`` (the stream breaks after N tokens), ``stall_after`` (silence
after N tokens until aborted), ``server_abort_after`` (the server aborts the request, with a
``status_code``). Everything a client sent is kept in ``requests``; ``states`` holds each
rid's fate.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from bench.sglang_sim.model import EOS_ID, PrefixCache, detokenize, output_ids, text_ids

#: The SGLang release whose source this server follows (and deploy/ pins).
UPSTREAM_VERSION = "0.5.23"

_HIST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, float("inf"))


@dataclass
class Recorded:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: Any
    at: float = field(default_factory=time.monotonic)


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


class SimulatedSGLang:
    """The fake's state and its Starlette app; configure ``config``, read the rest."""

    def __init__(self) -> None:
        self.config = SimConfig()
        self.cache = PrefixCache()
        self.requests: list[Recorded] = []
        self.aborts: list[Recorded] = []
        self.states: dict[str, ReqState] = {}
        self.events: list[tuple[str, str]] = []
        self.health_calls = 0
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
        self.routes = Starlette(
            routes=[
                Route("/generate", self.generate, methods=["POST", "PUT"]),
                Route("/abort_request", self.abort_request, methods=["POST"]),
                Route("/health", self.health, methods=["GET"]),
                Route("/health_generate", self.health, methods=["GET"]),
                Route("/ready", self.ready, methods=["GET"]),
                Route("/v1/loads", self.loads, methods=["GET"]),
                Route("/metrics", self.metrics, methods=["GET"]),
                Route("/model_info", self.model_info, methods=["GET"]),
                Route("/get_model_info", self.model_info, methods=["GET"]),
                Route("/server_info", self.server_info, methods=["GET"]),
                Route("/get_server_info", self.server_info, methods=["GET"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/flush_cache", self.flush_cache, methods=["POST", "GET"]),
            ]
        )
        self.app = _WithoutMissingRoutes(self)
        """The ASGI app: the routes, less ``config.missing_routes``."""

    def reset(self, **config: Any) -> None:
        """Forget every request and cache entry; apply ``config`` over the defaults."""
        self.config = SimConfig(**config)
        self._sem = None
        self.cache.clear()
        self.counters = dict.fromkeys(self.counters, 0)
        self.histograms = {name: [] for name in self.histograms}
        self.requests.clear()
        self.aborts.clear()
        self.states.clear()
        self.events.clear()
        self.health_calls = 0
        self.peak_running = 0
        self._together = None

    @property
    def generate_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.path == "/generate"]

    # -- /generate -----------------------------------------------------------------------

    async def generate(self, request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "invalid JSON body")
        self.requests.append(Recorded("/generate", dict(request.headers), body))
        cfg = self.config
        if cfg.reject_status is not None:  # a proxy's (or an older server's) HTTP status
            return _error(cfg.reject_status, _REASONS.get(cfg.reject_status, "rejected"))
        contract = _contract_error(body)
        if contract is not None:
            # entrypoints/http_server.py: generate_contract_error, before any streaming.
            return JSONResponse({"error": contract}, status_code=400)
        assert isinstance(body, dict)
        stream = bool(body.get("stream"))
        problem = self._validate(body)
        if problem is not None:
            # entrypoints/http_server.py: a streamed request is answered 200 before any check
            # runs; the ValueError of managers/tokenizer_manager.py::_validate_one_request comes
            # as an error event, then [DONE]. Without stream: HTTP 400 with the same error.
            error = {
                "message": problem,
                "type": "invalid_request_error",
                "code": 400,
                "retryable": False,
            }
            if not stream:
                return JSONResponse({"error": error}, status_code=400)
            return StreamingResponse(_chunks({"error": error}), media_type="text/event-stream")
        ids = _input_ids(body)
        rid = body.get("rid") or uuid.uuid4().hex
        params = body.get("sampling_params") or {}
        max_new = params.get("max_new_tokens", 128)
        state = ReqState(rid, ids, max_new, stream, params.get("stream_interval"))
        self.states[rid] = state
        # managers/scheduler.py::_abort_on_queued_limit: with --max-queued-requests, a request
        # the full waiting queue cannot take is aborted (the incoming one, without priority
        # scheduling): a finish reason of type abort with status_code 503, on a 200 stream.
        slots_full = self._sem is not None and self._sem.locked()
        if cfg.queue_capacity is not None and slots_full and self._waiting >= cfg.queue_capacity:
            state.finish_reason = _abort(QUEUE_FULL, status_code=503)
            self.counters["num_aborted_requests"] += 1
            if not stream:
                return _error(503, QUEUE_FULL)
            return StreamingResponse(
                _chunks(self._chunk(state, state.finish_reason)), media_type="text/event-stream"
            )
        self._active[rid] = state
        task = asyncio.create_task(self._decode(state))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if not stream:
            await task
            last = b""
            while not state.chunks.empty():
                item = state.chunks.get_nowait()
                if item is _BREAK:
                    return PlainTextResponse("Internal Server Error", status_code=500)
                if item and not item.startswith(b"data: [DONE]"):
                    last = item
            return Response(last.removeprefix(b"data: ").strip(), media_type="application/json")
        return StreamingResponse(self._body(state), media_type="text/event-stream")

    def _validate(self, body: dict[str, Any]) -> str | None:
        """The ``ValueError`` of ``managers/tokenizer_manager.py::_validate_one_request`` for a
        body that passed the contract, or None."""
        ids = _input_ids(body)
        if not ids:
            return "Either text or input_ids should be provided."
        max_new = (body.get("sampling_params") or {}).get("max_new_tokens", 128)
        if max_new < 0:
            return f"max_new_tokens must be at least 0, got {max_new}."
        context = self.config.context_length
        if len(ids) > context:
            return (
                f"The input ({len(ids)} tokens) is longer than the model's context length "
                f"({context} tokens)."
            )
        if len(ids) + max_new > context:
            return (
                f"Requested token count exceeds the model's maximum context length of "
                f"{context} tokens. You requested a total of {len(ids) + max_new} tokens: "
                f"{len(ids)} tokens from the input messages and {max_new} tokens for the "
                "completion. Please reduce the number of tokens in the input messages or the "
                "completion to fit within the limit."
            )
        rid = body.get("rid")
        if isinstance(rid, str) and rid in self._active:
            return f"Duplicate request ID: {rid}"
        return None

    async def _body(self, state: ReqState) -> AsyncIterator[bytes]:
        self._open_streams.add(state.rid)
        end = "disconnected"
        try:
            while True:
                item = await state.chunks.get()
                if item is None:
                    end = "complete"
                    return
                if item is _BREAK:
                    end = "broken"
                    raise ConnectionAbortedError(f"{state.rid}: the server failed mid-stream")
                yield item
        finally:
            self._open_streams.discard(state.rid)
            state.stream_end = end
            self.events.append((f"stream_{end}", state.rid))
            if end == "disconnected" and self.config.abort_on_disconnect:
                # tokenizer_manager.py::generate_request: the response failed, the request's
                # state is released and the scheduler told to abort it.
                self._abort(state)

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
            return await self._finish(state, _abort("Abort in waiting queue"))
        state.cached_tokens = min(self.cache.match(state.input_ids), len(state.input_ids) - 1)
        self.counters["prompt_tokens"] += len(state.input_ids)
        self.counters["cached_tokens"] += state.cached_tokens
        prefill_s = cfg.prefill_s_per_token * (len(state.input_ids) - state.cached_tokens)
        if await _wait(state.aborted, cfg.ttft_s + prefill_s):
            return await self._finish(state, _abort("Abort before prefill"))
        planned = output_ids(state.input_ids, state.max_new_tokens)
        last_token_at = time.monotonic()
        for i, token in enumerate(planned):
            if i == cfg.error_after:
                return await self._break(state, "CUDA out of memory.")
            if i == cfg.stall_after:
                await _wait(state.aborted, 30.0)  # silence, until aborted (or 30 s)
                return await self._finish(state, _abort("Unknown error"))
            if i == cfg.server_abort_after:
                status = cfg.server_abort_status
                return await self._finish(
                    state, _abort("Aborted by the server.", status_code=status)
                )
            if i == cfg.natural_tokens:
                return await self._finish(state, {"type": "stop", "matched": EOS_ID})
            if (i and await _wait(state.aborted, cfg.itl_s)) or state.aborted.is_set():
                return await self._finish(state, _abort("Unknown error"))
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
        await state.chunks.put(_BREAK)

    # -- control and observability ----------------------------------------------------------

    async def abort_request(self, request: Request) -> Response:
        try:
            body = await request.json()
        except ValueError:
            body = {}
        self.aborts.append(Recorded("/abort_request", dict(request.headers), body))
        rid = body.get("rid") if isinstance(body, dict) else None
        abort_all = isinstance(body, dict) and bool(body.get("abort_all"))
        for state in list(self._active.values()):
            if abort_all or (isinstance(rid, str) and state.rid.startswith(rid)):
                self._abort(state)
        return Response(status_code=200)

    def _abort(self, state: ReqState) -> None:
        if state.aborted.is_set() or state.rid not in self._active:
            return
        state.abort_requested_at = time.monotonic()
        state.stream_open_at_abort = state.rid in self._open_streams
        self.events.append(("abort", state.rid))
        state.aborted.set()

    async def health(self, request: Request) -> Response:
        """``entrypoints/http_server.py::health_generate``: 503 while starting or stopping;
        otherwise it generates one token and answers once the scheduler replied, checking
        every second: at least ``health_s`` (1 s upstream)."""
        self.health_calls += 1
        if not self.config.healthy:
            return Response(status_code=503)
        await asyncio.sleep(self.config.health_s)
        return Response(status_code=200 if self.config.healthy else 503)

    async def ready(self, request: Request) -> Response:
        """``/ready``: the cheap readiness check, no generation; 404 on servers without it."""
        if not self.config.has_ready:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return Response(status_code=200 if self.config.healthy else 503)

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

    async def loads(self, request: Request) -> Response:
        load = self._load()
        return JSONResponse({"timestamp": time.time(), "version": "fake", "loads": [load]})

    async def metrics(self, request: Request) -> Response:
        load = self._load()
        labels = f'{{model_name="{self.config.model}"}}'
        lines: list[str] = []
        gauges = {
            "num_running_reqs": load["num_running_reqs"],
            "num_queue_reqs": load["num_waiting_reqs"],
            "token_usage": load["token_usage"],
            "cache_hit_rate": load["cache_hit_rate"],
            "gen_throughput": 0.0,
        }
        for name, value in gauges.items():
            lines += [f"# TYPE sglang:{name} gauge", f"sglang:{name}{labels} {float(value)}"]
        for name, value in self.counters.items():
            lines += [
                f"# TYPE sglang:{name}_total counter",
                f"sglang:{name}_total{labels} {float(value)}",
            ]
        for name, values in self.histograms.items():
            lines.append(f"# TYPE sglang:{name} histogram")
            for le in _HIST_BUCKETS:
                bound = "+Inf" if le == float("inf") else repr(le)
                count = sum(1 for v in values if v <= le)
                label = f'{{model_name="{self.config.model}",le="{bound}"}}'
                lines.append(f"sglang:{name}_bucket{label} {float(count)}")
            lines.append(f"sglang:{name}_sum{labels} {float(sum(values))}")
            lines.append(f"sglang:{name}_count{labels} {float(len(values))}")
        return PlainTextResponse("\n".join(lines) + "\n", media_type="text/plain; version=0.0.4")

    async def model_info(self, request: Request) -> Response:
        """``/model_info`` (``entrypoints/http_server.py::get_model_info``): no context length."""
        return JSONResponse(
            {
                "model_path": self.config.model,
                "tokenizer_path": self.config.model,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": "llama",
                "architectures": ["LlamaForCausalLM"],
            }
        )

    async def server_info(self, request: Request) -> Response:
        """``/server_info``: a few of the launch arguments (as given: ``None`` unless set) and
        the scheduler's ``internal_states``, one per data-parallel rank."""
        cfg = self.config
        return JSONResponse(
            {
                "model_path": cfg.model,
                "context_length": cfg.context_length if cfg.launch_args else None,
                "max_running_requests": cfg.max_running if cfg.launch_args else None,
                "max_queued_requests": cfg.queue_capacity,
                "incremental_streaming_output": cfg.incremental,
                "dp_size": 1,
                "internal_states": [
                    {
                        "effective_max_running_requests_per_dp": cfg.max_running,
                        "last_gen_throughput": 0.0,
                        "memory_usage": {},
                    }
                ],
                "version": UPSTREAM_VERSION,
            }
        )

    async def models(self, request: Request) -> Response:
        """``GET /v1/models``: the served model and its context length, ``max_model_len``."""
        card = {
            "id": self.config.model,
            "object": "model",
            "created": int(time.time()),
            "owned_by": "sglang",
            "root": self.config.model,
            "parent": None,
            "max_model_len": self.config.context_length,
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def flush_cache(self, request: Request) -> Response:
        if self._active:
            return PlainTextResponse("Cache not flushed: requests are running.", status_code=400)
        self.cache.clear()
        return PlainTextResponse("Cache flushed.")


QUEUE_FULL = "The request queue is full."
_REASONS = {503: QUEUE_FULL, 429: "Too many requests.", 500: "Internal server error."}
#: ``sampling/sampling_params.py``: the keys ``SamplingParams`` takes (a few less used omitted).
SAMPLING_KEYS = frozenset(
    {
        "max_new_tokens", "min_new_tokens", "temperature", "top_p", "top_k", "min_p",
        "frequency_penalty", "presence_penalty", "repetition_penalty", "stop", "stop_token_ids",
        "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "json_schema",
        "regex", "ebnf", "n", "no_stop_trim", "custom_params", "stream_interval", "logit_bias",
        "sampling_seed",
    }
)  # fmt: skip


class _WithoutMissingRoutes:
    def __init__(self, server: SimulatedSGLang) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in self.server.config.missing_routes:
            response = JSONResponse({"detail": "Not Found"}, status_code=404)
            await response(scope, receive, send)
            return
        await self.server.routes(scope, receive, send)


#: A marker in a request's chunk queue: break the stream here.
_BREAK = b"<break>"


def _contract_error(body: Any) -> str | None:
    """What ``generate_contract_error`` (the ``GenerateRequest`` schema of
    ``api/v1/api_types.py``) refuses, for the fields a client of ours could get wrong."""
    if not isinstance(body, dict):
        return "invalid type: expected an object"
    params = body.get("sampling_params")
    if params is not None and not isinstance(params, dict):
        return "sampling_params: invalid type: expected an object"
    unknown = sorted(set(params or {}) - SAMPLING_KEYS)
    if unknown:
        return f"sampling_params: unknown field `{unknown[0]}`"
    max_new = (params or {}).get("max_new_tokens")
    if max_new is not None and not _is_int(max_new):
        return f"sampling_params.max_new_tokens: invalid type: expected an integer, got {max_new!r}"
    for key in ("priority",):
        if body.get(key) is not None and not _is_int(body[key]):
            return f"{key}: invalid type: expected an integer, got {body[key]!r}"
    if body.get("rid") is not None and not isinstance(body["rid"], str):
        return f"rid: invalid type: expected a string, got {body['rid']!r}"
    ids = body.get("input_ids")
    if ids is not None and not (isinstance(ids, list) and all(_is_int(t) for t in ids)):
        return "input_ids: invalid type: expected a list of integers"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _input_ids(body: dict[str, Any]) -> list[int]:
    ids = body.get("input_ids")
    if ids is None and isinstance(body.get("text"), str):
        ids = text_ids(body["text"])
    if isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids):
        return ids
    return []


async def _chunks(*chunks: Any) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": {"message": message}}, status_code=status)


def _streams_now(tokens: int, interval: int) -> bool:
    """Whether a stream sends a chunk once it holds ``tokens`` tokens (its finish is always
    sent): ``managers/scheduler_output_processor_mixin.py::stream_output_generation``, where the
    interval is ``req.sampling_params.stream_interval or self.stream_interval`` and, above 1, a
    chunk goes at the 1st token, then at the (1 + k x interval)th: the first token is never
    held back."""
    return tokens % interval == 1 if interval > 1 else True


def _abort(message: str, *, status_code: int | None = None) -> dict[str, Any]:
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
