"""The SGLang backend: the native ``/generate`` API, streamed, over pooled HTTP connections.

Each request sends ``input_ids`` (the served model's tokenization of ``AssembledPrompt``, so
the prompt the budget counted is the prompt RadixAttention caches), a fresh fixed-length random
``rid``, ``sampling_params`` (with a ``stream_interval`` when configured: the first token at
once, then a chunk every N tokens, so that each chunk's trip through ragtime carries N tokens)
and, where the server schedules by priority (its ``/server_info`` says so), the request's
deadline as its ``priority`` (``scheduling``: earliest first). SGLang streams cumulative text
by default (each chunk repeats everything so far); ``incremental=True`` is for servers started
with ``--incremental-streaming-output``. A chunk whose text does not extend the text so far is
an error, not silently mangled output: it means the flag does not match the server.

With ``--incremental-streaming-output`` an abort chunk still carries the full text so far
(``managers/tokenizer_manager.py``); it is read as cumulative, not appended again.

Cancelling (the consumer closes the stream, or its task is cancelled at the deadline) first
posts ``/abort_request`` for the rid, then closes the stream: closing alone does not stop
decoding on older SGLang. The final chunk's ``meta_info`` gives the usage and the finish
reason: ``stop``, ``length``, or ``abort``, which is ``"cancelled"`` when someone asked for it
and an error when the server aborted the request itself with a ``status_code``: 4xx is the
request's fault, 503 a full queue (busy), anything else the server's. With ``stream: true``
SGLang answers 200 before it validates the request, so a request error comes as an error
event, ``{"error": {"message", "type", "code": 400, "retryable": false}}``
(``entrypoints/http_server.py``). Failures map as ``inference.remote.http_stream`` describes.

Polling (``_poll_endpoint``, off the request path), first for readiness: ``GET /ready`` (an
SGLang server's cheap check); a 404 there and ``/readiness`` is asked (SGLang's gateway, 503
until one of its workers is healthy; its ``/health`` is liveness, always 200); a 404 there too
and ``/health`` (an older server: it generates a token and takes at least 1 s, hence
``health_timeout_s``). The route that answered is kept, so later polls ask it alone.

Then, as SGLang 0.5.23 tells them (``entrypoints/http_server.py``, ``managers/load_snapshot.py``):

- a server, when it joins: the served context length from ``GET /v1/models``
  (``max_model_len``; ``/model_info`` has none and ``/server_info`` only what was given at
  launch), the running batch from ``/server_info``'s
  ``internal_states[].effective_max_running_requests_per_dp``; at every poll, ``/v1/loads``
  (running and waiting requests, and each rank's ``max_running_requests``) and ``/metrics``
  (the TTFT and ITL histograms; a server without ``--enable-metrics`` leaves them unknown);
- a gateway (``sglang-router`` 0.3.2, ``smg`` 1.13.0), when it joins: ``/get_model_info`` (its
  first worker's ``/model_info``), ``/get_server_info`` (0.3.2: the router itself; smg: its
  first worker's ``/server_info``), ``/v1/models`` and ``/workers`` (smg labels each worker with
  its context length and batch); at every poll, ``/get_loads`` (a load of -1 is unknown, not
  down) and the workers' metrics on ``/engine_metrics``. The pool's batch is its healthy
  workers (``/readiness``) times each one's.

What none of these tells stays at the configured ``RemoteOptions.context_length`` and
``.max_running``. A gateway routes no ``/abort_request``: closing the stream is what stops the
worker's generation there (the gateway drops its upstream connection, and 0.5.23 aborts a
request whose client went away). A gateway with no worker for the model answers ``/generate``
with 404 ``model_not_found`` (smg) or 503 ``no_available_workers`` (0.3.2): that endpoint is
down, and the request moves on (``inference.remote.http_stream``).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from typing import Any

import httpx

from inference.backend import GenerationDone, Urgency, Usage
from inference.prompt import AssembledPrompt
from inference.remote.endpoints import EndpointState
from inference.remote.faults import StreamError, error_event
from inference.remote.http_stream import HTTPStreamBackend
from inference.remote.reports import parse_metrics
from inference.remote.sampling import Sampling
from inference.remote.scheduling import deadline_priority

log = logging.getLogger(__name__)

__all__ = ["SGLangBackend"]


class SGLangBackend(HTTPStreamBackend):
    """One or more SGLang servers serving the same model, least loaded first.

    ``tokenizer`` must be the served model's (e.g. ``HFTokenizer`` of the same path or id);
    it is loaded in ``start()`` when it has a ``load()`` method. ``options`` (a
    ``RemoteOptions``) holds the timeouts, what is told of a deadline and ``incremental``.
    """

    name = "sglang"

    @property
    def incremental(self) -> bool:
        return self.options.incremental

    def _request(
        self,
        prompt: AssembledPrompt,
        max_tokens: int,
        sampling: Sampling,
        rid: str,
        state: EndpointState,
        urgency: Urgency | None,
    ) -> tuple[str, dict[str, Any], dict[str, str]]:
        body: dict[str, Any] = {
            "input_ids": list(prompt.token_ids),
            "sampling_params": {"max_new_tokens": max_tokens, **sampling.sglang_params()},
            "stream": True,
            "rid": rid,
        }
        if urgency is not None and state.priority is not None:
            body["priority"] = deadline_priority(urgency.deadline, state.priority.order)
        if self.options.stream_interval is not None:
            body["sampling_params"]["stream_interval"] = self.options.stream_interval
        return "/generate", body, self._urgency_headers(urgency)

    def _decoder(self, prompt: AssembledPrompt) -> _Decoder:
        return _Decoder(prompt.prompt_tokens, incremental=self.incremental)

    async def _abort(self, client: httpx.AsyncClient, endpoint: str, rid: str) -> None:
        if self.states[endpoint].kind == "gateway":
            return  # no /abort_request there: closing the stream is the abort
        try:
            await client.post(
                endpoint + "/abort_request", json={"rid": rid}, timeout=self.abort_timeout
            )
        except httpx.HTTPError as exc:
            log.warning("sglang: could not abort %s on %s: %s", rid, endpoint, exc)

    async def _poll_endpoint(self, client: httpx.AsyncClient, state: EndpointState) -> None:
        timeout = self.poll_timeout
        ready = await _readiness(client, state, timeout)
        if ready.status_code != 200:
            state.mark_not_ready(
                f"not ready: {ready.request.url.path} answered {ready.status_code}"
            )
            return
        gateway = state.kind == "gateway"
        if gateway:
            state.read_readiness(_json(ready))
        if not state.joined:
            paths = _GATEWAY_FACTS if gateway else _SERVER_FACTS
            bodies = await asyncio.gather(
                *(_get_json(client, state.url + p, timeout) for p in paths)
            )
            state.read_info(*bodies)
            if not self.options.deadline_priority:
                state.priority = None  # told no deadline, it serves ours as they come
            if gateway:
                state.read_workers(bodies[-1])
            _say_what_is_unknown(state)
        loads_path = "/get_loads" if gateway else "/v1/loads"
        ours = state.in_flight  # as the snapshot is taken: the rest of its load is others'
        loads, metrics = await asyncio.gather(
            _get_json(client, state.url + loads_path, timeout),
            _get_metrics(client, state.url, timeout, gateway=gateway),
        )
        if gateway:
            state.read_gateway_load(loads, metrics, ours=ours)
        else:
            state.read_load(loads, metrics, ours=ours)
        state.mark_up()


#: Where each fact lives, read in this order (later wins: the most exact last).
_SERVER_FACTS = ("/model_info", "/server_info", "/v1/models")
_GATEWAY_FACTS = ("/get_model_info", "/get_server_info", "/v1/models", "/workers")
#: Readiness routes in the order they are tried while an endpoint's kind is unknown.
_READINESS = ("/ready", "/readiness", "/health")


def _say_what_is_unknown(state: EndpointState) -> None:
    unknown = [
        f"its {fact} (set RAGTIME_REMOTE_{name})"
        for fact, name, value in (
            ("context length", "CONTEXT_LENGTH", state.context_length),
            ("running batch", "MAX_RUNNING", state.max_running),
        )
        if value is None
    ]
    if unknown:
        log.warning("sglang: %s (%s) does not tell %s", state.url, state.kind, " or ".join(unknown))


async def _readiness(
    client: httpx.AsyncClient, state: EndpointState, timeout: httpx.Timeout
) -> httpx.Response:
    """The answer of the endpoint's readiness route, finding it first when it is not known:
    the first of ``_READINESS`` that is not a 404."""
    if state.readiness is not None:
        response = await client.get(state.url + state.readiness, timeout=timeout)
        if response.status_code != 404:
            return response
        state.readiness = None  # another kind of server now answers at this address
    for path in _READINESS:
        response = await client.get(state.url + path, timeout=timeout)
        if response.status_code != 404:
            state.readiness = path
            return response
    return response


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


class _Decoder:
    """Cumulative (or incremental) ``/generate`` chunks to deltas and the final event."""

    def __init__(self, prompt_tokens: int, *, incremental: bool) -> None:
        self.prompt_tokens = prompt_tokens
        self.incremental = incremental
        self.text = ""
        self.done: GenerationDone | None = None

    def feed(self, chunk: Mapping[str, Any]) -> str:
        if chunk.get("error") is not None:
            raise error_event(chunk)
        text = chunk.get("text") or ""
        if not isinstance(text, str):
            raise StreamError(f"chunk text is not a string: {text!r:.100}")
        meta = chunk.get("meta_info") or {}
        reason = meta.get("finish_reason")
        # An abort chunk carries the full text so far even with incremental output.
        cumulative = not self.incremental or (
            _kind(reason) == "abort" and text.startswith(self.text)
        )
        if not cumulative:
            delta = text
            self.text += text
        elif text.startswith(self.text):
            delta = text[len(self.text) :]
            self.text = text
        else:
            raise StreamError(
                "streamed text is not cumulative: does the server run with "
                "--incremental-streaming-output? (then set incremental=True)"
            )
        if reason:
            self.done = GenerationDone(
                usage=Usage(
                    prompt_tokens=_int(meta.get("prompt_tokens"), self.prompt_tokens),
                    cached_tokens=_int(meta.get("cached_tokens"), 0),
                    completion_tokens=_int(meta.get("completion_tokens"), 0),
                ),
                finish_reason=_finish_reason(reason),
                queue_ms=max(_float(meta.get("queue_time")), 0.0) * 1000.0,
            )
        return delta

    def finish(self) -> GenerationDone:
        if self.done is None:
            raise StreamError("the stream ended without a finish reason")
        return self.done


def _kind(reason: Any) -> str | None:
    if not reason:
        return None
    return str(reason.get("type")) if isinstance(reason, Mapping) else str(reason)


def _finish_reason(reason: Any) -> str:
    """SGLang's ``{"type": ...}`` as ours; an abort by the server (with a status) is an error:
    ``managers/scheduler.py`` aborts a request the full queue cannot take with 503."""
    kind = _kind(reason)
    if kind == "length":
        return "length"
    if kind == "abort":
        status = reason.get("status_code") if isinstance(reason, Mapping) else None
        if isinstance(status, int) and not isinstance(status, bool) and status:
            message = reason.get("message") if isinstance(reason, Mapping) else None
            raise StreamError(f"aborted by the server ({status}): {message}", status=status)
        return "cancelled"
    return "stop"


async def _get_json(client: httpx.AsyncClient, url: str, timeout: httpx.Timeout) -> Any:
    """A JSON body, or None when the server has no such route or says something else."""
    try:
        response = await client.get(url, timeout=timeout)
        return response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


async def _get_metrics(
    client: httpx.AsyncClient, base_url: str, timeout: httpx.Timeout, *, gateway: bool
) -> dict[str, float]:
    """``sglang:`` samples, summed over label sets; empty without ``--enable-metrics``.

    A server's are on ``/metrics``; a gateway's workers' on ``/engine_metrics`` (its own are on
    another port), each sample with a ``worker_addr`` label: sglang-router 0.3.2 turns every
    ``:`` of a name into ``_`` (``src/core/metrics_aggregator.rs``), smg keeps the names."""
    path = "/engine_metrics" if gateway else "/metrics"
    try:
        response = await client.get(base_url + path, timeout=timeout)
    except httpx.HTTPError:
        return {}
    if response.status_code != 200:
        return {}
    return parse_metrics(
        _GATEWAY_PREFIX.sub("sglang:", response.text) if gateway else response.text
    )


#: sglang-router 0.3.2's rename of ``sglang:`` metric names (at the start of each sample line).
_GATEWAY_PREFIX = re.compile(r"^sglang_", re.MULTILINE)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
