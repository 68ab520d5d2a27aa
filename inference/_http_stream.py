"""Streaming generation over HTTP: what the SGLang and OpenAI-compatible backends share.

A subclass says how to build its request (``_request``), how to read one SSE chunk (a
``ChunkDecoder``) and how to stop a request on the server (``_abort``). This module does the
rest: one long-lived ``httpx.AsyncClient`` with explicit timeouts, a round-robin pool of
endpoints that puts those that just failed last, retries before the first delta, cancellation
(abort on the server first, then close the stream), and the translation of outside failures::

    failure                                   before the first delta   after it
    connection refused or timed out           next endpoint            -
    5xx or 429 status (503: queue full)       next endpoint            -
    other 4xx status                          BackendUnavailable       -
    error event, server abort, stream cut     next endpoint            GenerationFailed
    stall: no byte within stall_timeout_s     abort, next endpoint     abort, GenerationFailed

When every attempt failed the caller gets ``BackendUnavailable`` naming each failure. Nothing
is retried once text was yielded, so output is never duplicated. There is no deadline argument
in the backend contract: the caller enforces its deadline by cancelling (the pipeline's
``wait_for``), which aborts the running request; here, attempts are bounded by
``max_attempts`` and each by the connect and stall timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import secrets
import time
from abc import abstractmethod
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Protocol

import httpx
from opentelemetry import propagate

from inference.backend import GenerationBackend, GenerationDone, GenerationEvent, TextDelta
from inference.errors import BackendUnavailable, GenerationFailed
from inference.prompt import AssembledPrompt
from inference.tokenizer import PromptTokenizer, load_tokenizer

log = logging.getLogger(__name__)

RID_BYTES = 16
"""Request ids are ``2 * RID_BYTES`` hex digits: fixed length, so none is a prefix of another."""


def new_rid() -> str:
    return secrets.token_hex(RID_BYTES)


class StreamError(Exception):
    """The stream said the request failed: an error event, an abort by the server, bad data."""


class Rejected(Exception):
    """The server answered the request with an error status instead of a stream."""

    def __init__(self, status_code: int, detail: str) -> None:
        super().__init__(f"HTTP {status_code}: {detail}")
        self.status_code = status_code

    @property
    def retryable(self) -> bool:
        return self.status_code >= 500 or self.status_code in (408, 429)


class ChunkDecoder(Protocol):
    """Reads one request's SSE chunks (parsed JSON) into text deltas and the final event."""

    @property
    def done(self) -> GenerationDone | None:
        """The final event, once a chunk has said how the request finished."""

    def feed(self, chunk: Mapping[str, Any]) -> str:
        """The new text in ``chunk`` (maybe empty); raises ``StreamError`` for an error."""

    def finish(self) -> GenerationDone:
        """At the end of the stream: the final event, or ``StreamError`` if it never came."""


async def iter_sse_json(response: httpx.Response) -> AsyncGenerator[dict[str, Any], None]:
    """The JSON ``data`` of each server-sent event, until ``[DONE]`` or the end of the body."""
    data: list[str] = []
    lines = response.aiter_lines()
    while True:
        line = await anext(lines, None)
        if line is not None and line:
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            continue  # comments (":"), "event:", "id:" and "retry:" lines carry nothing here
        if data:
            payload = "\n".join(data)
            data = []
            if payload.strip() == "[DONE]":
                return
            try:
                chunk = json.loads(payload)
            except ValueError as exc:
                raise StreamError(f"not JSON in the stream: {payload[:200]!r}") from exc
            if not isinstance(chunk, dict):
                raise StreamError(f"not a JSON object in the stream: {payload[:200]!r}")
            yield chunk
        if line is None:
            return


class EndpointPool:
    """Round-robin over endpoints; one that failed goes last for ``cooldown_s`` seconds."""

    def __init__(self, endpoints: Sequence[str], *, cooldown_s: float = 5.0) -> None:
        if not endpoints:
            raise ValueError("at least one endpoint is needed")
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.cooldown_s = cooldown_s
        self._failed_at: dict[str, float] = {}
        self._next = 0

    def order(self) -> list[str]:
        """Every endpoint, healthy ones first, starting one further along each call."""
        start, self._next = self._next, (self._next + 1) % len(self.endpoints)
        rotated = self.endpoints[start:] + self.endpoints[:start]
        now = time.monotonic()
        cooling = {e for e, at in self._failed_at.items() if now - at < self.cooldown_s}
        return [e for e in rotated if e not in cooling] + [e for e in rotated if e in cooling]

    def failed(self, endpoint: str) -> None:
        self._failed_at[endpoint] = time.monotonic()

    def succeeded(self, endpoint: str) -> None:
        self._failed_at.pop(endpoint, None)

    @property
    def any_healthy(self) -> bool:
        now = time.monotonic()
        return any(
            now - self._failed_at.get(e, -float("inf")) >= self.cooldown_s for e in self.endpoints
        )


class HTTPStreamBackend(GenerationBackend):
    """A remote backend streaming SSE over one pooled ``httpx.AsyncClient``.

    ``start()`` loads the tokenizer (if it has a ``load()``), builds the client and checks
    ``health_path`` on every endpoint; an unhealthy server leaves ``loaded`` False without
    raising, and a background check every ``health_interval_s`` (None: never) or any served
    request brings it back. The W3C ``traceparent`` of the context current when ``stream()``
    is called travels with the request.
    """

    health_path = "/health"

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        model: str,
        tokenizer: PromptTokenizer,
        connect_timeout_s: float = 2.0,
        stall_timeout_s: float = 10.0,
        max_attempts: int | None = None,
        cooldown_s: float = 5.0,
        health_interval_s: float | None = 10.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if connect_timeout_s <= 0 or stall_timeout_s <= 0:
            raise ValueError("timeouts must be > 0")
        self.model = model
        self._pool = EndpointPool(endpoints, cooldown_s=cooldown_s)
        self.max_attempts = max_attempts or len(self._pool.endpoints)
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        self.timeout = httpx.Timeout(
            connect=connect_timeout_s, read=stall_timeout_s, write=stall_timeout_s, pool=None
        )
        self.abort_timeout = httpx.Timeout(connect_timeout_s)
        self.health_interval_s = health_interval_s
        self._headers = dict(headers or {})
        self._tokenizer = tokenizer
        self._client: httpx.AsyncClient | None = None
        self._healthy = False
        self._poller: asyncio.Task[None] | None = None

    @property
    def endpoints(self) -> list[str]:
        return list(self._pool.endpoints)

    @property
    def tokenizer(self) -> PromptTokenizer:
        return self._tokenizer

    @property
    def loaded(self) -> bool:
        return self._client is not None and self._healthy

    async def start(self) -> None:
        if self._client is not None:
            return
        await load_tokenizer(self._tokenizer, self.name)
        self._client = httpx.AsyncClient(
            timeout=self.timeout,
            headers=self._headers,
            limits=httpx.Limits(max_keepalive_connections=64),
        )
        await self.check_health()
        if not self._healthy:
            log.warning("%s: no endpoint is healthy yet: %s", self.name, self.endpoints)
        if self.health_interval_s:
            self._poller = asyncio.create_task(self._poll_health(self.health_interval_s))

    async def close(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        client, self._client = self._client, None
        self._healthy = False
        if client is not None:
            await client.aclose()

    async def check_health(self) -> bool:
        """GET ``health_path`` on every endpoint; True when at least one answers 200."""
        client = self._client
        if client is None:
            return False
        results = await asyncio.gather(*(self._probe(client, e) for e in self._pool.endpoints))
        self._healthy = any(results)
        return self._healthy

    async def _probe(self, client: httpx.AsyncClient, endpoint: str) -> bool:
        try:
            response = await client.get(endpoint + self.health_path, timeout=self.abort_timeout)
        except httpx.HTTPError:
            ok = False
        else:
            ok = response.status_code == 200
        if ok:
            self._pool.succeeded(endpoint)
        else:
            self._pool.failed(endpoint)
        return ok

    async def _poll_health(self, interval_s: float) -> None:
        while self._client is not None:  # ends when close() cancels it
            await asyncio.sleep(interval_s)
            await self.check_health()

    def stream(
        self,
        prompt: AssembledPrompt,
        *,
        max_tokens: int,
        temperature: float = 0.0,
        deadline: float | None = None,
    ) -> AsyncGenerator[GenerationEvent, None]:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        headers: dict[str, str] = {}
        propagate.inject(headers)  # now, in the caller's context, not at the first anext()
        return self._stream(prompt, max_tokens, temperature, headers)

    @abstractmethod
    def _request(
        self, prompt: AssembledPrompt, max_tokens: int, temperature: float, rid: str
    ) -> tuple[str, dict[str, Any], dict[str, str]]:
        """The path, JSON body and extra headers of one attempt."""

    @abstractmethod
    def _decoder(self, prompt: AssembledPrompt) -> ChunkDecoder:
        """A fresh decoder for one attempt's stream."""

    async def _abort(self, client: httpx.AsyncClient, endpoint: str, rid: str) -> None:
        """Stop ``rid`` on the server before its stream is closed; by default nothing."""

    async def _stream(
        self,
        prompt: AssembledPrompt,
        max_tokens: int,
        temperature: float,
        trace_headers: dict[str, str],
    ) -> AsyncGenerator[GenerationEvent, None]:
        client = self._client
        if client is None:
            raise BackendUnavailable(f"the {self.name} backend is not started")
        failures: list[str] = []
        last: BaseException | None = None
        endpoints = itertools.islice(itertools.cycle(self._pool.order()), self.max_attempts)
        streamed = False
        for endpoint in endpoints:
            rid = new_rid()
            path, body, extra = self._request(prompt, max_tokens, temperature, rid)
            decoder = self._decoder(prompt)
            response: httpx.Response | None = None
            # Held here, and closed only after the abort: dropped, it would be finalized by the
            # event loop at once, and that closes the connection before the abort is sent.
            chunks: AsyncGenerator[dict[str, Any], None] | None = None
            # The network wait under way: shielded, so that a cancellation (the deadline)
            # reaches httpcore, which drops the connection, only after the abort is sent.
            pending: asyncio.Future[Any] | None = None
            live = False  # the server may be running this rid: abort it if we leave early
            done: GenerationDone | None = None
            try:
                request = client.build_request(
                    "POST", endpoint + path, json=body, headers={**trace_headers, **extra}
                )
                live = True
                pending = asyncio.ensure_future(client.send(request, stream=True))
                response = opened = await asyncio.shield(pending)
                pending = None
                if opened.status_code != 200:
                    live = False
                    raise Rejected(opened.status_code, await _detail(opened))
                self._healthy = True
                chunks = iter_sse_json(opened)
                try:
                    while True:
                        pending = asyncio.ensure_future(_next(chunks))
                        chunk = await asyncio.shield(pending)
                        pending = None
                        if chunk is None:
                            break
                        text = decoder.feed(chunk)
                        if decoder.done is not None:
                            live = False
                        if text:
                            streamed = True
                            yield TextDelta(text)
                except httpx.TransportError:
                    if decoder.done is None:
                        raise  # a broken tail after the finish chunk does not matter
                live = False
                done = decoder.finish()
                self._pool.succeeded(endpoint)
            except (httpx.HTTPError, StreamError, Rejected) as exc:
                if isinstance(exc, StreamError | httpx.ConnectError | httpx.ConnectTimeout):
                    live = False  # the server ended the request, or never saw it
                message = f"{endpoint}: {_describe(exc, self.timeout)}"
                if streamed:
                    raise GenerationFailed(f"{self.name} failed mid-stream: {message}") from exc
                if isinstance(exc, Rejected) and not exc.retryable:
                    raise BackendUnavailable(f"{self.name} refused the request: {message}") from exc
                self._pool.failed(endpoint)
                failures.append(message)
                last = exc
                log.warning("%s attempt failed, %s", self.name, message)
                continue
            finally:
                try:
                    if live:
                        await self._abort(client, endpoint, rid)
                finally:
                    if pending is not None:
                        response = await _settle(pending) or response
                    if chunks is not None:
                        await chunks.aclose()
                    if response is not None:
                        await response.aclose()
            yield done
            return
        self._healthy = self._pool.any_healthy
        raise BackendUnavailable(
            f"{self.name}: no endpoint served the request "
            f"({len(failures)} attempt(s)): " + "; ".join(failures)
        ) from last


async def _next(chunks: AsyncGenerator[dict[str, Any], None]) -> dict[str, Any] | None:
    return await anext(chunks, None)


async def _settle(pending: asyncio.Future[Any]) -> httpx.Response | None:
    """Cancel an abandoned network wait; the response it may still have produced, to close."""
    pending.cancel()
    await asyncio.wait([pending])
    if pending.cancelled() or pending.exception() is not None:
        return None
    result = pending.result()
    return result if isinstance(result, httpx.Response) else None


async def _detail(response: httpx.Response) -> str:
    """The error message of a non-200 answer, read leniently and briefly."""
    try:
        raw = await response.aread()
    except httpx.HTTPError:
        return response.reason_phrase
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:200].decode(errors="replace") or response.reason_phrase
    return error_message(body) if isinstance(body, dict) else str(body)[:200]


def error_message(body: Mapping[str, Any]) -> str:
    """``{"error": {"message": ...}}`` (SGLang, OpenAI), ``{"error": "..."}`` or ``{"detail"}``."""
    error = body.get("error", body.get("detail", body))
    if isinstance(error, Mapping):
        return str(error.get("message") or error)[:500]
    return str(error)[:500]


def _describe(exc: BaseException, timeout: httpx.Timeout) -> str:
    if isinstance(exc, httpx.ConnectError):
        return f"connection failed ({exc or type(exc).__name__})"
    if isinstance(exc, httpx.ConnectTimeout):
        return f"no connection within {timeout.connect} s"
    if isinstance(exc, httpx.ReadTimeout):
        return f"stalled: no data within {timeout.read} s"
    if isinstance(exc, httpx.HTTPError):
        return f"{type(exc).__name__}: {exc}"
    return str(exc)
