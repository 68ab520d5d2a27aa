"""A fake SGLang server that speaks the native protocol as ``shared/reference/sglang-protocol.md``
describes it, for tests only.

``POST /generate`` streams ``data: <json>`` chunks whose ``text`` and ``output_ids`` are
cumulative (incremental with ``incremental=True``), every one with ``meta_info``, then
``data: [DONE]``. The finish reason is ``{"type": "stop", "matched": EOS}`` after
``natural_tokens``, ``{"type": "length", "length": N}`` at ``max_new_tokens``, or
``{"type": "abort", ...}``. Decoding runs in a task of its own, as in SGLang's scheduler: closing
the stream does **not** stop it (upstream issue 36333); only ``/abort_request`` does, matching
rids by prefix. ``cached_tokens`` comes from a trie of the token ids of finished requests (at
most ``prompt_tokens - 1``: the last prompt token is always computed). A full queue answers
503 before streaming. Also ``/health``, ``/health_generate``, ``/v1/loads``, ``/get_load``,
``/metrics`` (``sglang:`` names), ``/model_info``, ``/flush_cache``.

Fail modes, each off by default: ``reject_status`` (answer every ``/generate`` with it),
``error_after`` (an error event after N tokens), ``stall_after`` (silence after N tokens until
aborted), ``server_abort_after`` (the server aborts the request, with a ``status_code``).
Everything a client sent is kept in ``requests``; ``states`` holds each rid's fate.
"""

from __future__ import annotations

import asyncio
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

from tests.fakes._model import EOS_ID, PrefixCache, detokenize, output_ids, text_ids

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


@dataclass
class FakeConfig:
    model: str = "fake/tiny-chat"
    ttft_s: float = 0.0
    itl_s: float = 0.0
    natural_tokens: int = 12
    tokens_per_chunk: int = 1
    incremental: bool = False
    max_running: int = 64
    queue_capacity: int | None = None
    context_length: int = 8192
    healthy: bool = True
    reject_status: int | None = None
    error_after: int | None = None
    stall_after: int | None = None
    server_abort_after: int | None = None


class FakeSGLang:
    """The fake's state and its Starlette app; configure ``config``, read the rest."""

    def __init__(self) -> None:
        self.config = FakeConfig()
        self.cache = PrefixCache()
        self.requests: list[Recorded] = []
        self.aborts: list[Recorded] = []
        self.states: dict[str, ReqState] = {}
        self.events: list[tuple[str, str]] = []
        self._active: dict[str, ReqState] = {}
        self._open_streams: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._sem: asyncio.Semaphore | None = None
        self._waiting = 0
        self.counters = dict.fromkeys(
            ("prompt_tokens", "generation_tokens", "cached_tokens", "num_aborted_requests"), 0
        )
        self.histograms: dict[str, list[float]] = {
            "time_to_first_token_seconds": [],
            "inter_token_latency_seconds": [],
            "e2e_request_latency_seconds": [],
            "queue_time_seconds": [],
        }
        self.app = Starlette(
            routes=[
                Route("/generate", self.generate, methods=["POST", "PUT"]),
                Route("/abort_request", self.abort_request, methods=["POST"]),
                Route("/health", self.health, methods=["GET"]),
                Route("/health_generate", self.health, methods=["GET"]),
                Route("/v1/loads", self.loads, methods=["GET"]),
                Route("/get_load", self.loads, methods=["GET"]),
                Route("/metrics", self.metrics, methods=["GET"]),
                Route("/model_info", self.model_info, methods=["GET"]),
                Route("/flush_cache", self.flush_cache, methods=["POST", "GET"]),
            ]
        )

    def reset(self, **config: Any) -> None:
        """Forget every request and cache entry; apply ``config`` over the defaults."""
        self.config = FakeConfig(**config)
        self._sem = None
        self.cache.clear()
        self.counters = dict.fromkeys(self.counters, 0)
        self.histograms = {name: [] for name in self.histograms}
        self.requests.clear()
        self.aborts.clear()
        self.states.clear()
        self.events.clear()

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
        if cfg.reject_status is not None:
            return _error(cfg.reject_status, "The request queue is full.")
        if not isinstance(body, dict):
            return _error(400, "the body must be an object")
        ids = body.get("input_ids")
        if ids is None and isinstance(body.get("text"), str):
            ids = text_ids(body["text"])
        if not (isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids)):
            return _error(400, "Either text or input_ids should be provided.")
        params = body.get("sampling_params") or {}
        max_new = params.get("max_new_tokens", 128)
        if not isinstance(max_new, int) or max_new < 0:
            return _error(400, f"max_new_tokens must be a non-negative int, got {max_new!r}")
        if len(ids) + max_new > cfg.context_length:
            return _error(400, f"The input ({len(ids)} tokens) is longer than the context.")
        rid = body.get("rid") or uuid.uuid4().hex
        if not isinstance(rid, str):
            return _error(400, "rid must be a string")
        if rid in self._active:
            return _error(400, f"Duplicate request ID {rid}")
        slots_full = self._sem is not None and self._sem.locked()
        if cfg.queue_capacity is not None and slots_full and self._waiting >= cfg.queue_capacity:
            return _error(503, "The request queue is full.")
        state = ReqState(rid, ids, max_new, bool(body.get("stream")))
        self.states[rid] = state
        self._active[rid] = state
        task = asyncio.create_task(self._decode(state))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if not state.stream:
            await task
            last = b""
            while not state.chunks.empty():
                item = state.chunks.get_nowait()
                if item and not item.startswith(b"data: [DONE]"):
                    last = item
            return Response(last.removeprefix(b"data: ").strip(), media_type="application/json")
        return StreamingResponse(self._body(state), media_type="text/event-stream")

    async def _body(self, state: ReqState) -> AsyncIterator[bytes]:
        self._open_streams.add(state.rid)
        end = "disconnected"
        try:
            while True:
                item = await state.chunks.get()
                if item is None:
                    end = "complete"
                    return
                yield item
        finally:
            self._open_streams.discard(state.rid)
            state.stream_end = end
            self.events.append((f"stream_{end}", state.rid))

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

    async def _run(self, state: ReqState, cfg: FakeConfig) -> None:
        state.started = time.monotonic()
        state.queue_s = state.started - state.arrived
        self.histograms["queue_time_seconds"].append(state.queue_s)
        if state.aborted.is_set():
            return await self._finish(state, _abort("Abort in waiting queue"))
        state.cached_tokens = min(self.cache.match(state.input_ids), len(state.input_ids) - 1)
        self.counters["prompt_tokens"] += len(state.input_ids)
        self.counters["cached_tokens"] += state.cached_tokens
        if await _wait(state.aborted, cfg.ttft_s):
            return await self._finish(state, _abort("Abort before prefill"))
        planned = output_ids(state.input_ids, state.max_new_tokens)
        last_token_at = time.monotonic()
        for i, token in enumerate(planned):
            if i == cfg.error_after:
                return await self._emit_error(state, "Internal server error: CUDA out of memory.")
            if i == cfg.stall_after:
                await _wait(state.aborted, 30.0)  # silence, until aborted (or 30 s)
                return await self._finish(state, _abort("Unknown error"))
            if i == cfg.server_abort_after:
                return await self._finish(state, _abort("Waited too long.", status_code=503))
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
            if len(state.output) % cfg.tokens_per_chunk == 0 and i + 1 < len(planned):
                await self._emit(state, None)
        await self._finish(state, {"type": "length", "length": state.max_new_tokens})

    async def _finish(self, state: ReqState, reason: dict[str, Any]) -> None:
        state.finish_reason = reason
        if reason["type"] == "abort":
            self.counters["num_aborted_requests"] += 1
        self.histograms["e2e_request_latency_seconds"].append(time.monotonic() - state.arrived)
        await self._emit(state, reason)
        await state.chunks.put(b"data: [DONE]\n\n")

    async def _emit(self, state: ReqState, reason: dict[str, Any] | None) -> None:
        """Queue one chunk: the text so far (or its new part), ``meta_info`` always."""
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
        incremental = self.config.incremental
        ids = state.output[state.ids_sent :] if incremental else state.output
        chunk = {
            "text": text[len(state.text_sent) :] if incremental else text,
            "output_ids": list(ids),
            "meta_info": meta,
        }
        state.text_sent, state.ids_sent = text, len(state.output)
        await state.chunks.put(b"data: " + json.dumps(chunk).encode() + b"\n\n")

    async def _emit_error(self, state: ReqState, message: str) -> None:
        state.finish_reason = {"type": "error", "message": message}
        error = json.dumps({"error": {"message": message}}).encode()
        await state.chunks.put(b"data: " + error + b"\n\n")
        await state.chunks.put(b"data: [DONE]\n\n")

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
                state.abort_requested_at = time.monotonic()
                state.stream_open_at_abort = state.rid in self._open_streams
                self.events.append(("abort", state.rid))
                state.aborted.set()
        return Response(status_code=200)

    async def health(self, request: Request) -> Response:
        return Response(status_code=200 if self.config.healthy else 503)

    def _load(self) -> dict[str, Any]:
        running = sum(1 for s in self._active.values() if s.started is not None)
        prompt = self.counters["prompt_tokens"]
        return {
            "dp_rank": 0,
            "num_running_reqs": running,
            "num_waiting_reqs": self._waiting,
            "num_reqs": len(self._active),
            "num_tokens": sum(len(s.input_ids) + len(s.output) for s in self._active.values()),
            "token_usage": 0.0,
            "cache_hit_rate": self.counters["cached_tokens"] / prompt if prompt else 0.0,
        }

    async def loads(self, request: Request) -> Response:
        load = self._load()
        if request.url.path == "/get_load":
            return JSONResponse([load])
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
        return JSONResponse({"model_path": self.config.model, "is_generation": True})

    async def flush_cache(self, request: Request) -> Response:
        if self._active:
            return PlainTextResponse("Cache not flushed: requests are running.", status_code=400)
        self.cache.clear()
        return PlainTextResponse("Cache flushed.")


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": {"message": message}}, status_code=status)


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
