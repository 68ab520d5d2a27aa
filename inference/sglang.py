"""The SGLang backend: the native ``/generate`` API, streamed, over pooled HTTP connections.

Each request sends ``input_ids`` (the served model's tokenization of ``AssembledPrompt``, so
the prompt the budget counted is the prompt RadixAttention caches), a fresh fixed-length random
``rid``, ``sampling_params`` and, when configured, ``priority``. SGLang streams cumulative text
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
(``entrypoints/http_server.py``). Failures map as ``inference._http_stream`` describes.

Polling (``_poll_endpoint``, off the request path): ``GET /ready`` (the cheap readiness check;
a server without it answers 404 and ``/health`` is asked instead, with ``health_timeout_s``:
it generates a token and takes at least 1 s); when the endpoint joins, ``/model_info`` and
``/server_info`` for its context length and ``max_running_requests``; while it is up,
``/v1/loads`` (running and waiting requests) and ``/metrics`` (the TTFT and ITL histograms,
optional: a server without ``--enable-metrics`` leaves them unknown).

An endpoint may be SGLang's gateway (sgl-model-gateway) in front of a pool of workers
(``deploy/k8s``): it has no ``/ready`` but ``/readiness`` (503 until a worker is healthy; its
``/health`` is liveness, always 200), its ``/v1/loads`` carries no request counts, and its
workers' metrics are on ``/engine_metrics``; the poll reads those instead
(``EndpointState.read_load``). It routes no ``/abort_request`` (404): closing the stream is
what stops the worker's generation there.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from typing import Any

import httpx

from inference._endpoints import EndpointState, parse_metrics
from inference._http_stream import HTTPStreamBackend, StreamError, error_event, not_ready
from inference.backend import GenerationDone, Usage
from inference.prompt import AssembledPrompt

log = logging.getLogger(__name__)

__all__ = ["SGLangBackend"]


class SGLangBackend(HTTPStreamBackend):
    """One or more SGLang servers serving the same model, least loaded first.

    ``tokenizer`` must be the served model's (e.g. ``HFTokenizer`` of the same path or id);
    it is loaded in ``start()`` when it has a ``load()`` method. ``options`` (a
    ``RemoteOptions``) holds the timeouts, ``priority`` and ``incremental``.
    """

    name = "sglang"

    @property
    def priority(self) -> int | None:
        return self.options.priority

    @property
    def incremental(self) -> bool:
        return self.options.incremental

    def _request(
        self, prompt: AssembledPrompt, max_tokens: int, temperature: float, rid: str
    ) -> tuple[str, dict[str, Any], dict[str, str]]:
        body: dict[str, Any] = {
            "input_ids": list(prompt.token_ids),
            "sampling_params": {"max_new_tokens": max_tokens, "temperature": temperature},
            "stream": True,
            "rid": rid,
        }
        if self.priority is not None:
            body["priority"] = self.priority
        return "/generate", body, {}

    def _decoder(self, prompt: AssembledPrompt) -> _Decoder:
        return _Decoder(prompt.prompt_tokens, incremental=self.incremental)

    async def _abort(self, client: httpx.AsyncClient, endpoint: str, rid: str) -> None:
        try:
            await client.post(
                endpoint + "/abort_request", json={"rid": rid}, timeout=self.abort_timeout
            )
        except httpx.HTTPError as exc:
            log.warning("sglang: could not abort %s on %s: %s", rid, endpoint, exc)

    async def _poll_endpoint(self, client: httpx.AsyncClient, state: EndpointState) -> None:
        timeout = self.poll_timeout
        ready = await client.get(state.url + "/ready", timeout=timeout)
        if ready.status_code == 404:  # SGLang's gateway: 503 until one of its workers is healthy
            ready = await client.get(state.url + "/readiness", timeout=timeout)
        if ready.status_code == 404:  # an older server: /health generates a token (>= 1 s)
            ready = await client.get(state.url + "/health", timeout=timeout)
        if ready.status_code != 200:
            not_ready(state, f"not ready: {ready.request.url.path} answered {ready.status_code}")
            return
        if not state.joined:
            state.read_info(*await asyncio.gather(*(
                _get_json(client, state.url + path, timeout)
                for path in ("/model_info", "/server_info")
            )))  # fmt: skip
        loads, metrics = await asyncio.gather(
            client.get(state.url + "/v1/loads", timeout=timeout),
            _get_metrics(client, state.url, timeout),
        )
        if loads.status_code != 200:
            raise ValueError(f"/v1/loads answered {loads.status_code}")
        state.read_load(loads.json(), metrics)
        state.mark_up()


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
    client: httpx.AsyncClient, base_url: str, timeout: httpx.Timeout
) -> dict[str, float]:
    """``sglang:`` samples; empty without ``--enable-metrics``.

    A server's ``/metrics``; SGLang's gateway serves its own metrics on another port (404
    here) and its workers' on ``/engine_metrics``, each sample with a ``worker_addr`` label and
    every ``:`` turned into ``_`` (sgl-model-gateway ``src/core/metrics_aggregator.rs``)."""
    try:
        response = await client.get(base_url + "/metrics", timeout=timeout)
        if response.status_code == 404:
            response = await client.get(base_url + "/engine_metrics", timeout=timeout)
            if response.status_code == 200:
                return parse_metrics(_GATEWAY_PREFIX.sub("sglang:", response.text))
    except httpx.HTTPError:
        return {}
    return parse_metrics(response.text) if response.status_code == 200 else {}


#: The gateway's rename of ``sglang:`` metric names (at the start of each sample line).
_GATEWAY_PREFIX = re.compile(r"^sglang_", re.MULTILINE)


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
