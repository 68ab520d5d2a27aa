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
- The request then runs in the scheduler (``scheduler``: the queue, the running batch, the
  chunks, the finish reasons, aborts); ``contract`` holds the checks above.

What the server tells about itself, each fact only where upstream gives it:

- ``/model_info``: the model path and ``is_generation``; **no context length**.
- ``/server_info``: the launch arguments as given (``context_length`` and
  ``max_running_requests`` are ``None`` unless set at launch: ``launch_args=True``), and
  ``internal_states[]`` with ``effective_max_running_requests_per_dp``.
- ``GET /v1/models``: the served context length, ``max_model_len``.
- ``GET /v1/loads``: per data-parallel rank, ``num_running_reqs``, ``num_waiting_reqs`` and
  ``max_running_requests`` (``managers/load_snapshot.py``). ``/get_load`` is gone.
- ``/metrics``: the ``sglang:`` gauges, counters and histograms of ``metrics/collector.py``.

Fail modes, each off by default: ``reject_status`` (an HTTP status before streaming, as a proxy
in front would), and the scheduler's (``error_after``, ``stall_after``, ``server_abort_after``).
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
from starlette.types import Receive, Scope, Send

from bench.sglang_sim.contract import contract_error, input_ids, validation_error
from bench.sglang_sim.scheduler import (
    BREAK,
    QUEUE_FULL,
    ReqState,
    SimulatedScheduler,
    abort_reason,
)

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


class SimulatedSGLang(SimulatedScheduler):
    """The fake's state and its Starlette app; configure ``config``, read the rest."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[Recorded] = []
        self.aborts: list[Recorded] = []
        self.health_calls = 0
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
                Route("/bench/pace", self.pace, methods=["POST"]),
            ]
        )
        self.app = _WithoutMissingRoutes(self)
        """The ASGI app: the routes, less ``config.missing_routes``."""

    def reset(self, **config: Any) -> None:
        """Forget every request and cache entry; apply ``config`` over the defaults."""
        super().reset(**config)
        self.requests.clear()
        self.aborts.clear()
        self.health_calls = 0

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
        contract = contract_error(body)
        if contract is not None:
            # entrypoints/http_server.py: generate_contract_error, before any streaming.
            return JSONResponse({"error": contract}, status_code=400)
        assert isinstance(body, dict)
        stream = bool(body.get("stream"))
        problem = validation_error(body, context_length=cfg.context_length, running=self._active)
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
            return StreamingResponse(_chunks({"error": error}), media_type=SSE)
        ids = input_ids(body)
        rid = body.get("rid") or uuid.uuid4().hex
        params = body.get("sampling_params") or {}
        max_new = params.get("max_new_tokens", 128)
        state = ReqState(rid, ids, max_new, stream, params.get("stream_interval"))
        state.priority = body.get("priority")
        self.states[rid] = state
        refusal = self._refusal(state)
        if refusal is not None:
            state.finish_reason = refusal
            self.counters["num_aborted_requests"] += 1
            if not stream:
                return _error(503, refusal["message"])
            return StreamingResponse(_chunks(self._chunk(state, refusal)), media_type=SSE)
        task = self._submit(state)
        if not stream:
            await task
            last = b""
            while not state.chunks.empty():
                item = state.chunks.get_nowait()
                if item is BREAK:
                    return PlainTextResponse("Internal Server Error", status_code=500)
                if item and not item.startswith(b"data: [DONE]"):
                    last = item
            return Response(last.removeprefix(b"data: ").strip(), media_type="application/json")
        return StreamingResponse(self._body(state), media_type=SSE)

    def _refusal(self, state: ReqState) -> dict[str, Any] | None:
        """The abort a request gets before it is queued (``managers/scheduler.py``), if any:

        - ``_set_or_validate_priority``: a ``priority`` on a server without priority
          scheduling, launched with ``--abort-on-priority-when-disabled``;
        - ``_abort_on_queued_limit``: with ``--max-queued-requests``, a request the full
          waiting queue cannot take (the incoming one; under priority scheduling, the least
          preferred waiting one instead when the newcomer is strictly preferred to it, which
          is evicted with its own message).
        """
        cfg = self.config
        refuses_priority = cfg.abort_on_priority_when_disabled and not cfg.priority_scheduling
        if state.priority is not None and refuses_priority:
            return abort_reason(PRIORITY_DISABLED, status_code=503)
        if cfg.queue_capacity is None or len(self.batch.waiting) + 1 <= cfg.queue_capacity:
            return None
        if not self.batch.full:
            return None  # it runs at once: the queue does not grow
        evicted = self.batch.to_evict_for(state.priority)
        if evicted is None:
            return abort_reason(QUEUE_FULL, status_code=503)
        victim = self._active.get(evicted.rid)
        if victim is not None:
            self._abort(victim, abort_reason(EVICTED, status_code=503))
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
                if item is BREAK:
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
        """``/server_info``: a few of the launch arguments (as given: ``None`` unless set; the
        whole ``ServerArgs`` upstream, the scheduling flags among them) and the scheduler's
        ``internal_states``, one per data-parallel rank."""
        cfg = self.config
        return JSONResponse(
            {
                "model_path": cfg.model,
                "context_length": cfg.context_length if cfg.launch_args else None,
                "max_running_requests": cfg.max_running if cfg.launch_args else None,
                "max_queued_requests": cfg.queue_capacity,
                "schedule_policy": "fcfs",
                "enable_priority_scheduling": cfg.priority_scheduling,
                "disable_priority_preemption": not cfg.priority_preemption,
                "abort_on_priority_when_disabled": cfg.abort_on_priority_when_disabled,
                "schedule_low_priority_values_first": cfg.low_priority_values_first,
                "priority_scheduling_preemption_threshold": cfg.preemption_threshold,
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

    async def pace(self, request: Request) -> Response:
        """``POST /bench/pace {"factor": F}``: every timing from now on is F times the
        configured one. Not SGLang's: a bench's way to slow the engine down without notice
        (ragtime never calls it)."""
        try:
            factor = float((await request.json())["factor"])
        except (ValueError, KeyError, TypeError):
            return _error(400, 'expected {"factor": <number above 0>}')
        if not factor > 0:
            return _error(400, 'expected {"factor": <number above 0>}')
        self.config.slow_factor = factor
        return JSONResponse({"factor": factor})

    async def flush_cache(self, request: Request) -> Response:
        if self._active:
            return PlainTextResponse("Cache not flushed: requests are running.", status_code=400)
        self.cache.clear()
        return PlainTextResponse("Cache flushed.")


SSE = "text/event-stream"
PRIORITY_DISABLED = (
    "Using priority is disabled for this server. Please send a new request without a priority."
)
EVICTED = "The request is aborted by a higher priority request."
_REASONS = {503: QUEUE_FULL, 429: "Too many requests.", 500: "Internal server error."}


class _WithoutMissingRoutes:
    def __init__(self, server: SimulatedSGLang) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in self.server.config.missing_routes:
            response = JSONResponse({"detail": "Not Found"}, status_code=404)
            await response(scope, receive, send)
            return
        await self.server.routes(scope, receive, send)


async def _chunks(*chunks: Any) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": {"message": message}}, status_code=status)
