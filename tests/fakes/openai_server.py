"""A minimal fake OpenAI-compatible server (``/v1/completions``, ``/v1/models``), for tests only.

Streams ``text_completion`` chunks with deltas in ``choices[0].text``, a chunk with the
``finish_reason``, then (with ``stream_options.include_usage``) a usage chunk with empty
``choices``, then ``data: [DONE]``, as vLLM and SGLang do. ``prompt_tokens_details`` appears
only when some tokens were cached. The prompt may be text (one token per word) or token ids.
Decoding happens in the response itself, so a closed stream stops it (as vLLM does).

Errors follow vLLM (``vllm/entrypoints/openai/serving_engine.py``): a request found invalid
before streaming (a prompt plus ``max_tokens`` over ``max_model_len``) is an HTTP 400
``{"error": {"message", "type": "BadRequestError", "param", "code": 400}}``
(``create_error_response``); an error once the stream has begun is a
``data: {"error": {...}}`` event (``create_streaming_error_response``, used by
``serving_completion.py``). ``/v1/models`` cards carry ``max_model_len``
(``serving_models.py``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bench.sglang_sim.model import PrefixCache, detokenize, output_ids, text_ids
from bench.sglang_sim.server import Recorded


@dataclass
class OpenAIConfig:
    model: str = "fake/tiny-chat"
    api_key: str | None = None
    itl_s: float = 0.0
    natural_tokens: int = 12
    reject_status: int | None = None
    error_after: int | None = None
    error_code: int = 500
    max_model_len: int = 8192


class FakeOpenAI:
    def __init__(self) -> None:
        self.config = OpenAIConfig()
        self.cache = PrefixCache()
        self.requests: list[Recorded] = []
        self.decoded: dict[str, int] = {}
        self.app = Starlette(
            routes=[
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
            ]
        )

    def reset(self, **config: Any) -> None:
        self.config = OpenAIConfig(**config)
        self.cache.clear()
        self.requests.clear()
        self.decoded.clear()

    def _unauthorized(self, request: Request) -> Response | None:
        key = self.config.api_key
        if key and request.headers.get("authorization") != f"Bearer {key}":
            return _error(401, "Incorrect API key provided.", "invalid_request_error")
        return None

    async def models(self, request: Request) -> Response:
        denied = self._unauthorized(request)
        if denied is not None:
            return denied
        card = {
            "id": self.config.model,
            "object": "model",
            "max_model_len": self.config.max_model_len,
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(Recorded("/v1/completions", dict(request.headers), body))
        denied = self._unauthorized(request)
        if denied is not None:
            return denied
        if self.config.reject_status is not None:
            return _error(self.config.reject_status, "Server overloaded.", "server_error")
        prompt = body.get("prompt")
        ids = text_ids(prompt) if isinstance(prompt, str) else prompt
        if not (isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids)):
            return _error(400, "prompt must be a string or a list of token ids", "invalid")
        if not body.get("stream"):
            return _error(400, "this fake only streams", "invalid_request_error")
        max_tokens = int(body.get("max_tokens") or 16)
        if len(ids) + max_tokens > self.config.max_model_len:
            return _error(
                400,
                f"This model's maximum context length is {self.config.max_model_len} tokens. "
                f"However, you requested {len(ids) + max_tokens} tokens ({len(ids)} in the "
                f"messages, {max_tokens} in the completion). Please reduce the length of the "
                "messages or completion.",
                "BadRequestError",
            )
        usage = bool((body.get("stream_options") or {}).get("include_usage"))
        rid = request.headers.get("x-request-id", f"cmpl-{len(self.requests)}")
        return StreamingResponse(
            self._stream(rid, ids, max_tokens, usage), media_type="text/event-stream"
        )

    async def _stream(
        self, rid: str, ids: list[int], max_tokens: int, include_usage: bool
    ) -> AsyncIterator[bytes]:
        cfg = self.config
        cached = min(self.cache.match(ids), len(ids) - 1)
        planned = output_ids(ids, min(max_tokens, cfg.natural_tokens))
        sent, out = "", []
        self.decoded[rid] = 0
        created = int(time.time())
        for i, token in enumerate(planned):
            if i == cfg.error_after:
                code = cfg.error_code
                kind = "BadRequestError" if code < 500 else "InternalServerError"
                error = {"error": {"message": "engine died", "type": kind, "code": code}}
                yield _data(error)
                yield b"data: [DONE]\n\n"
                return
            if i and cfg.itl_s:
                await asyncio.sleep(cfg.itl_s)
            out.append(token)
            self.decoded[rid] = len(out)
            text = detokenize(out)
            if text != sent:
                yield _data(_chunk(rid, created, cfg.model, text[len(sent) :], None))
                sent = text
        self.cache.insert(ids + out)
        final = detokenize(out, final=True)
        reason = "length" if max_tokens <= cfg.natural_tokens else "stop"
        yield _data(_chunk(rid, created, cfg.model, final[len(sent) :], reason))
        if include_usage:
            usage: dict[str, Any] = {
                "prompt_tokens": len(ids),
                "completion_tokens": len(out),
                "total_tokens": len(ids) + len(out),
            }
            if cached > 0:
                usage["prompt_tokens_details"] = {"cached_tokens": cached}
            yield _data(
                {"id": rid, "object": "text_completion", "created": created,
                 "model": cfg.model, "choices": [], "usage": usage}
            )  # fmt: skip
        yield b"data: [DONE]\n\n"


def _chunk(rid: str, created: int, model: str, text: str, reason: str | None) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "text_completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": reason}],
    }


def _data(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _error(status: int, message: str, kind: str) -> Response:
    body = {"message": message, "type": kind, "param": None, "code": status}
    return JSONResponse({"error": body}, status_code=status)
