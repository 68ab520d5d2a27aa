"""Streaming generation over HTTP: what the SGLang and OpenAI-compatible backends share.

A subclass says how to build its request (``_request``), how to read one SSE chunk (a
``ChunkDecoder``), how to stop a request on the server (``_abort``) and how to poll an
endpoint (``_poll_endpoint``). The rest is shared: one long-lived ``httpx.AsyncClient`` with
explicit timeouts and one ``EndpointState`` per endpoint (``endpoints``), kept by a background
poll (``polled``) and by what requests see; and here, retries before the first delta, the fit
of the output to the endpoint's context length, cancellation (abort on the server first, then
close the stream), and the translation of failures by whose fault they are (decided in
``faults``; the events are read by ``sse``). ``_stream`` tries endpoint after endpoint;
``_attempt`` is one request to one endpoint::

    failure                                      before the first delta      after it
    the request's own (HTTP 400/413/422, an      GenerationRejected: not     GenerationFailed
      error event with a 4xx code or             retried, endpoint stays up
      retryable false, an abort with a 4xx)
    busy (HTTP 429/503, an abort with 503 or     endpoint busy, next one;    GenerationFailed
      429: "The request queue is full.")         all busy: BackendBusy
    the server's (5xx, refused or dropped        endpoint down, next one     GenerationFailed
      connection, error event, stall: no byte
      within stall_timeout_s: aborted first)
    an empty pool (SGLang's gateway with no      endpoint down, next one     -
      worker for the model: 404
      model_not_found, 503 no_available_workers)
    other 4xx (401, 403, 404: configuration)     BackendUnavailable          -

When every attempt failed the caller gets ``BackendUnavailable`` naming each failure. Nothing
is retried once text was yielded, so output is never duplicated. The caller enforces its
deadline by cancelling (the pipeline's deadline wait), which aborts the running request; here,
attempts are bounded by ``max_attempts`` and each by the connect and stall timeouts.

Before each attempt ``stream()`` yields a ``RouteDecision`` naming the endpoint. If the prompt
plus ``max_tokens`` would not fit the endpoint's context length (read when it joined), the
output is capped to fit and the decision says so (``("output_capped", ...)``); a prompt that
leaves fewer than ``min_output_tokens`` is a ``GenerationRejected`` without being sent. SGLang
refuses a request whose prompt plus ``max_new_tokens`` is over the context length
(``managers/tokenizer_manager.py``, ``>``): exactly the context length is served.
"""

from __future__ import annotations

import asyncio
import logging
from abc import abstractmethod
from collections.abc import AsyncGenerator, Coroutine
from contextlib import aclosing
from typing import Any

import httpx
from opentelemetry import propagate

from inference.backend import (
    SERVER_PENALTIES,
    GenerationDone,
    GenerationEvent,
    Penalties,
    RouteDecision,
    TextDelta,
    Urgency,
    Usage,
)
from inference.errors import BackendBusy, BackendUnavailable, GenerationFailed
from inference.prompt import AssembledPrompt
from inference.remote.endpoints import EndpointState, order_endpoints
from inference.remote.faults import (
    FAILS_THE_REQUEST,
    Rejected,
    StreamError,
    context_length_in,
    describe,
    rejection_detail,
)
from inference.remote.polled import PolledBackend
from inference.remote.sampling import Sampling
from inference.remote.scheduling import slo_headers
from inference.remote.sse import ChunkDecoder, iter_sse_json, new_rid

log = logging.getLogger(__name__)


class HTTPStreamBackend(PolledBackend):
    """A remote backend streaming SSE from its endpoints (``PolledBackend``), with retries before
    the first delta; see the module docstring. The W3C ``traceparent`` of the context current
    when ``stream()`` is called travels with the request."""

    # -- streaming -----------------------------------------------------------------------------

    def _generate(
        self,
        prompt: AssembledPrompt,
        *,
        max_tokens: int,
        temperature: float,
        deadline: float | None,
        target: str | None,
        urgency: Urgency | None = None,
        penalties: Penalties = SERVER_PENALTIES,
    ) -> AsyncGenerator[GenerationEvent, None]:
        return self.open_stream(prompt, max_tokens, temperature, None, urgency, penalties)

    def open_stream(
        self,
        prompt: AssembledPrompt,
        max_tokens: int,
        temperature: float,
        only: str | None,
        urgency: Urgency | None = None,
        penalties: Penalties = SERVER_PENALTIES,
    ) -> AsyncGenerator[GenerationEvent, None]:
        headers: dict[str, str] = {}
        propagate.inject(headers)  # now, in the caller's context, not at the first anext()
        sampling = Sampling(temperature, penalties)
        return self._stream(prompt, max_tokens, sampling, headers, only, urgency)

    @abstractmethod
    def _request(
        self,
        prompt: AssembledPrompt,
        max_tokens: int,
        sampling: Sampling,
        rid: str,
        state: EndpointState,
        urgency: Urgency | None,
    ) -> tuple[str, dict[str, Any], dict[str, str]]:
        """The path, JSON body and extra headers of one attempt to ``state``."""

    def _urgency_headers(self, urgency: Urgency | None) -> dict[str, str]:
        """What a gateway that schedules by it is told of ``urgency`` (``scheduling``): llm-d's
        SLO headers and SMG's priority class, each where the options ask for it."""
        if urgency is None:
            return {}
        headers: dict[str, str] = {}
        if self.options.slo_headers:
            headers.update(slo_headers(urgency))
        if self.options.gateway_classes is not None:
            headers.update(self.options.gateway_classes.header(urgency))
        return headers

    @abstractmethod
    def _decoder(self, prompt: AssembledPrompt) -> ChunkDecoder:
        """A fresh decoder for one attempt's stream."""

    async def _abort(self, client: httpx.AsyncClient, endpoint: str, rid: str) -> None:
        """Stop ``rid`` on the server before its stream is closed; by default nothing."""

    def _order(self, only: str | None) -> list[EndpointState]:
        """The endpoints to try (see ``order_endpoints``), or ``only`` that one."""
        if only is not None:
            return [self._states[only]]
        states = list(self._states.values())
        turn, self._turn = self._turn, (self._turn + 1) % len(states)
        return order_endpoints(states, turn, self.options.cooldown_s)

    async def _stream(
        self,
        prompt: AssembledPrompt,
        max_tokens: int,
        sampling: Sampling,
        trace_headers: dict[str, str],
        only: str | None,
        urgency: Urgency | None = None,
    ) -> AsyncGenerator[GenerationEvent, None]:
        """Attempts, endpoint by endpoint, until one serves; each failure by whose fault. A
        request whose ``urgency`` deadline has passed is not sent (an expired deadline must not
        reach a scheduler as the most urgent): it ends at once, finish reason ``deadline``."""
        client = self._client
        if client is None:
            raise BackendUnavailable(f"the {self.name} backend is not started")
        failures: list[str] = []
        busy = 0
        last: BaseException | None = None
        order = self._order(only)[: 1 if only is not None else self.max_attempts]
        relearned = False  # the context length learned from a refusal, and tried again once
        while order:
            if urgency is not None and urgency.left_ms() <= 0:
                yield GenerationDone(Usage(prompt.prompt_tokens, 0, 0), "deadline", 0.0)
                return
            state = order.pop(0)
            fitted, degradation = state.fit_output(
                prompt.prompt_tokens, max_tokens, self.options.min_output_tokens, self.name
            )
            yield RouteDecision(
                target=state.url,
                model=self.model,
                reason="failover" if failures else "endpoint",
                detail=failures[-1] if failures else "",
                degradation=degradation,
            )
            streamed = False
            try:
                attempt = self._attempt(
                    client, state, prompt, fitted, sampling, trace_headers, urgency
                )
                async with aclosing(attempt):
                    async for event in attempt:
                        streamed = streamed or isinstance(event, TextDelta)
                        yield event
                return
            except (httpx.HTTPError, StreamError) as exc:
                fault = exc.fault if isinstance(exc, StreamError) else "server"
                message = f"{state.url}: {describe(exc, self.timeout)}"
                if streamed:
                    raise GenerationFailed(f"{self.name} failed mid-stream: {message}") from exc
                learned = context_length_in(str(exc)) if fault == "request" else None
                if learned is not None and not relearned and learned != state.context_length:
                    # An endpoint that did not tell its context length (a gateway in front of
                    # 0.5.23), or told one that is no longer so, says it when it refuses: fit the
                    # output to it and ask again. Its next poll reads its facts afresh.
                    log.warning("%s: %s serves %d context tokens", self.name, state.url, learned)
                    state.context_length, state.joined, relearned = learned, False, True
                    order.insert(0, state)
                    continue
                fails = FAILS_THE_REQUEST.get(fault)
                if fails is not None:
                    status = exc.status if isinstance(exc, StreamError) else None
                    raise fails(self.name, message, status) from exc
                if fault == "busy":
                    busy += 1
                    state.mark_busy(message, self.options.busy_s)
                else:
                    state.mark_down(message)
                failures.append(message)
                last = exc
                log.warning("%s attempt failed, %s", self.name, message)
        summary = f"({len(failures)} attempt(s)): " + "; ".join(failures)
        if failures and busy == len(failures):
            raise BackendBusy(
                f"{self.name}: every endpoint tried is busy {summary}",
                retry_after_s=max(self.options.busy_s, 1.0),
            ) from last
        raise BackendUnavailable(f"{self.name}: no endpoint served the request {summary}") from last

    async def _attempt(
        self,
        client: httpx.AsyncClient,
        state: EndpointState,
        prompt: AssembledPrompt,
        max_tokens: int,
        sampling: Sampling,
        trace_headers: dict[str, str],
        urgency: Urgency | None = None,
    ) -> AsyncGenerator[TextDelta | GenerationDone, None]:
        """One request to one endpoint: its deltas, then its ``GenerationDone``; a failure
        raises (``StreamError`` or an ``httpx`` error). Left early (closed, or cancelled at the
        deadline), the request is aborted on the server before its stream is closed."""
        endpoint = state.url
        rid = new_rid()
        path, body, extra = self._request(prompt, max_tokens, sampling, rid, state, urgency)
        decoder = self._decoder(prompt)
        response: httpx.Response | None = None
        # Held here, and closed only after the abort: dropped, it would be finalized by the
        # event loop at once, and that closes the connection before the abort is sent.
        chunks: AsyncGenerator[dict[str, Any], None] | None = None
        # The network wait under way: shielded, so that a cancellation (the deadline) reaches
        # httpcore, which drops the connection, only after the abort is sent.
        pending: asyncio.Future[Any] | None = None
        live = False  # the server may be running this rid: abort it if we leave early
        abandoned = False  # closed or cancelled by the caller while live
        state.in_flight += 1
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
                raise Rejected(opened.status_code, *await rejection_detail(opened))
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
                        yield TextDelta(text)
            except httpx.TransportError:
                if decoder.done is None:
                    raise  # a broken tail after the finish chunk does not matter
            live = False
            done = decoder.finish()
            if not state.up:
                state.mark_up()
        except (StreamError, httpx.ConnectError, httpx.ConnectTimeout):
            live = False  # the server ended the request, or never saw it
            raise
        except (GeneratorExit, asyncio.CancelledError):
            abandoned = live
            raise
        finally:
            state.in_flight -= 1
            cleanup = self._close_attempt(
                client, endpoint, rid if live else None, pending, chunks, response
            )
            if abandoned:
                # Left early (the deadline, a client gone): the answer's last event must not
                # wait on the abort's round trip, so the abort and the close run on their own.
                _run_detached(cleanup)
            else:
                await cleanup
        yield done

    async def _close_attempt(
        self,
        client: httpx.AsyncClient,
        endpoint: str,
        rid: str | None,
        pending: asyncio.Future[Any] | None,
        chunks: AsyncGenerator[dict[str, Any], None] | None,
        response: httpx.Response | None,
    ) -> None:
        """Abort ``rid`` on the server (when given), then close the attempt's stream."""
        try:
            if rid is not None:
                await self._abort(client, endpoint, rid)
        finally:
            if pending is not None:
                response = await _settle(pending) or response
            if chunks is not None:
                await chunks.aclose()
            if response is not None:
                await response.aclose()


async def _next(chunks: AsyncGenerator[dict[str, Any], None]) -> dict[str, Any] | None:
    return await anext(chunks, None)


_DETACHED: set[asyncio.Task[None]] = set()


def _run_detached(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` in a task of its own, held until it ends (the loop keeps only weak
    references to tasks); its failure is logged, not raised."""
    task = asyncio.get_running_loop().create_task(work)
    _DETACHED.add(task)
    task.add_done_callback(_detached_done)


def _detached_done(task: asyncio.Task[None]) -> None:
    _DETACHED.discard(task)
    if not task.cancelled() and task.exception() is not None:
        log.warning("closing an abandoned generation failed: %r", task.exception())


async def _settle(pending: asyncio.Future[Any]) -> httpx.Response | None:
    """Cancel an abandoned network wait; the response it may still have produced, to close."""
    pending.cancel()
    await asyncio.wait([pending])
    if pending.cancelled() or pending.exception() is not None:
        return None
    result = pending.result()
    return result if isinstance(result, httpx.Response) else None
