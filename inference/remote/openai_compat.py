"""An OpenAI-compatible backend: ``/completions``, streamed (vLLM, SGLang, llama.cpp, hosted).

The assembled prompt is already rendered with the model's chat template, so it is sent to the
legacy completions route as a raw ``prompt`` rather than re-split into chat ``messages``: the
text itself by default, or ``prompt.token_ids`` with ``send_token_ids=True`` (vLLM, SGLang and
llama.cpp's server accept token ids; then the prompt counted is exactly the prompt served).
``stream_options.include_usage`` asks for the usage chunk at the end;
``usage.prompt_tokens_details.cached_tokens`` is read when the server reports it.
Endpoints are base URLs that include the version, e.g. ``http://vllm:8000/v1``.

Cancelling closes the stream (vLLM and llama.cpp's server stop on disconnect); the rid goes in
``X-Request-Id`` for the server's logs. A request vLLM finds invalid before streaming is an
HTTP 400 (``serving_engine.py::create_error_response``); an error once the stream has begun
is a ``data: {"error": {"message", "type", "code"}}`` event
(``serving_completion.py``/``serving_engine.py::create_streaming_error_response``), 4xx codes
the request's fault, others the server's. Failures map as ``inference.remote.http_stream``
describes. Polling asks ``/models``, whose cards give vLLM's ``max_model_len``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from inference.backend import GenerationDone, Urgency, Usage
from inference.prompt import AssembledPrompt
from inference.remote.endpoints import EndpointState
from inference.remote.faults import StreamError, error_event
from inference.remote.http_stream import HTTPStreamBackend
from inference.remote.options import RemoteOptions
from inference.remote.sampling import Sampling
from inference.tokenizer import PromptTokenizer

__all__ = ["OpenAICompatBackend"]


class OpenAICompatBackend(HTTPStreamBackend):
    """``POST {endpoint}/completions`` with ``stream: true``; ``model`` is sent as is."""

    name = "openai"

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        model: str,
        tokenizer: PromptTokenizer,
        api_key: str | None = None,
        send_token_ids: bool = False,
        options: RemoteOptions | None = None,
    ) -> None:
        super().__init__(
            endpoints,
            model=model,
            tokenizer=tokenizer,
            options=options,
            headers={"Authorization": f"Bearer {api_key}"} if api_key else None,
        )
        self.send_token_ids = send_token_ids

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
            "model": self.model,
            "prompt": list(prompt.token_ids) if self.send_token_ids else prompt.text,
            "max_tokens": max_tokens,
            **sampling.openai_params(),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        return "/completions", body, {"X-Request-Id": rid, **self._urgency_headers(urgency)}

    def _decoder(self, prompt: AssembledPrompt) -> _Decoder:
        return _Decoder(prompt.prompt_tokens)


class _Decoder:
    """Completion chunks (``choices[0].text``, or a chat ``delta.content``), then the usage."""

    done: GenerationDone | None = None  # known only at ``[DONE]``: the usage chunk comes last

    def __init__(self, prompt_tokens: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.reason: str | None = None
        self.usage: Mapping[str, Any] | None = None
        self.chunks = 0

    def feed(self, chunk: Mapping[str, Any]) -> str:
        if chunk.get("error") is not None or chunk.get("object") == "error":
            raise error_event(chunk)
        if isinstance(chunk.get("usage"), Mapping):
            self.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not choices or not isinstance(choices[0], Mapping):
            return ""
        choice = choices[0]
        delta = choice.get("delta")
        text = choice.get("text")
        if text is None and isinstance(delta, Mapping):
            text = delta.get("content")
        reason = choice.get("finish_reason")
        if reason:
            self.reason = _finish_reason(str(reason))
        if not isinstance(text, str) or not text:
            return ""
        self.chunks += 1
        return text

    def finish(self) -> GenerationDone:
        if self.reason is None:
            raise StreamError("the stream ended without a finish reason")
        usage = self.usage or {}
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
        return GenerationDone(
            usage=Usage(
                prompt_tokens=_int(usage.get("prompt_tokens"), self.prompt_tokens),
                cached_tokens=_int(cached, 0),
                completion_tokens=_int(usage.get("completion_tokens"), self.chunks),
            ),
            finish_reason=self.reason,
            queue_ms=0.0,
        )


def _finish_reason(reason: str) -> str:
    if reason == "length":
        return "length"
    if reason in ("abort", "cancelled"):
        return "cancelled"
    return "stop"


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
