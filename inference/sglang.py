"""The SGLang backend: the native ``/generate`` API, streamed, over pooled HTTP connections.

Each request sends ``input_ids`` (the served model's tokenization of ``AssembledPrompt``, so
the prompt the budget counted is the prompt RadixAttention caches), a fresh fixed-length random
``rid``, ``sampling_params`` and, when configured, ``priority``. SGLang streams cumulative text
by default (each chunk repeats everything so far); ``incremental=True`` is for servers started
with ``--incremental-streaming-output``. A chunk whose text does not extend the text so far is
an error, not silently mangled output: it means the flag does not match the server.

Cancelling (the consumer closes the stream, or its task is cancelled at the deadline) first
posts ``/abort_request`` for the rid, then closes the stream: closing alone does not stop
decoding on recent SGLang. The final chunk's ``meta_info`` gives the usage and the finish
reason: ``stop``, ``length``, or ``abort``, which is ``"cancelled"`` when someone asked for it
and an error (retried before the first delta) when the server aborted the request itself
(it then carries a ``status_code``). Failures map as ``inference._http_stream`` describes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from inference._http_stream import HTTPStreamBackend, StreamError, error_message
from inference.backend import GenerationDone, Usage
from inference.prompt import AssembledPrompt
from inference.tokenizer import PromptTokenizer

log = logging.getLogger(__name__)

__all__ = ["SGLangBackend"]


class SGLangBackend(HTTPStreamBackend):
    """One or more SGLang servers serving the same model, tried round-robin.

    ``tokenizer`` must be the served model's (e.g. ``HFTokenizer`` of the same path or id);
    it is loaded in ``start()`` when it has a ``load()`` method. ``stall_timeout_s`` bounds
    every wait for data, the first token included.
    """

    name = "sglang"

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        model: str,
        tokenizer: PromptTokenizer,
        connect_timeout_s: float = 2.0,
        stall_timeout_s: float = 10.0,
        priority: int | None = None,
        incremental: bool = False,
        max_attempts: int | None = None,
        cooldown_s: float = 5.0,
        health_interval_s: float | None = 10.0,
    ) -> None:
        super().__init__(
            endpoints,
            model=model,
            tokenizer=tokenizer,
            connect_timeout_s=connect_timeout_s,
            stall_timeout_s=stall_timeout_s,
            max_attempts=max_attempts,
            cooldown_s=cooldown_s,
            health_interval_s=health_interval_s,
        )
        self.priority = priority
        self.incremental = incremental

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


class _Decoder:
    """Cumulative (or incremental) ``/generate`` chunks to deltas and the final event."""

    def __init__(self, prompt_tokens: int, *, incremental: bool) -> None:
        self.prompt_tokens = prompt_tokens
        self.incremental = incremental
        self.text = ""
        self.done: GenerationDone | None = None

    def feed(self, chunk: Mapping[str, Any]) -> str:
        if chunk.get("error") is not None:
            raise StreamError(f"error event: {error_message(chunk)}")
        text = chunk.get("text") or ""
        if not isinstance(text, str):
            raise StreamError(f"chunk text is not a string: {text!r:.100}")
        if self.incremental:
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
        meta = chunk.get("meta_info") or {}
        reason = meta.get("finish_reason")
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


def _finish_reason(reason: Any) -> str:
    """SGLang's ``{"type": ...}`` as ours; an abort by the server (with a status) is an error."""
    kind = reason.get("type") if isinstance(reason, Mapping) else str(reason)
    if kind == "length":
        return "length"
    if kind == "abort":
        status = reason.get("status_code") if isinstance(reason, Mapping) else None
        if status:
            message = reason.get("message") if isinstance(reason, Mapping) else None
            raise StreamError(f"aborted by the server ({status}): {message}")
        return "cancelled"
    return "stop"


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _float(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0
