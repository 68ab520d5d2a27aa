"""``POST /v1/ask``: an answer with citations, as JSON or as Server-Sent Events.

Streaming: ``token`` events carry text deltas, then one ``done`` event carries the report (the
JSON answer minus its text), or an ``error`` event if generation fails after the first token.
Everything before the first token (retrieval, prompt, the backend starting) fails as a plain
HTTP error, so a caller never receives a stream that was doomed from the start.

A client that disconnects, streaming or not, stops its generation: the stream is closed, and a
JSON answer being collected is cancelled when the client is gone (checked every 50 ms).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from opentelemetry import trace
from opentelemetry.trace import Span
from sse_starlette import EventSourceResponse

from app.body import openapi_body
from app.deps import AskBody, CurrentKey, LedgerDep, PipelineDep, SettingsDep
from app.errors import error_body
from app.limits import check_text, resolve_count
from app.pipeline import AnswerDone, AnswerEvent, AnswerOutcome, Prepared
from app.report import (
    answer_report,
    close_request,
    error_outcome,
    success_outcome,
    timing_headers,
)
from app.schemas import AskRequest, AskResponse
from inference import InferenceError
from tracing import BudgetLedger

router = APIRouter(tags=["answers"])
ROUTE = "/v1/ask"
#: How often a JSON answer being collected checks that its client is still there.
DISCONNECT_POLL_S = 0.05
#: nginx's "client closed request": never sent to anyone, but logged and counted as the client's.
CLIENT_CLOSED_REQUEST = 499


@router.post(ROUTE, response_model=AskResponse, openapi_extra=openapi_body(AskRequest))
async def ask(
    request: Request,
    body: AskBody,
    key: CurrentKey,
    ledger: LedgerDep,
    pipeline: PipelineDep,
    settings: SettingsDep,
) -> Any:
    question = check_text(body.question, field="question", settings=settings)
    top_k = resolve_count(
        body.top_k, field="top_k", default=settings.top_k, maximum=settings.max_top_k
    )
    collection = body.collection or settings.default_collection
    root = trace.get_current_span()
    root.set_attributes(
        {"ragtime.collection": collection, "ragtime.top_k": top_k, "ragtime.stream": body.stream}
    )
    if settings.record_content:
        root.set_attribute("ragtime.question", question)

    model = pipeline.services.backend.model
    try:
        prepared = await pipeline.prepare(question, collection, top_k, ledger)
        events = pipeline.generate(prepared, ledger)
        if body.stream:
            first = await anext(events)
            drain = Drain(settings.shutdown_grace_s)
            return EventSourceResponse(
                _events(first, events, prepared, ledger, root, model, drain),
                shutdown_event=drain.started,
                shutdown_grace_period=settings.shutdown_grace_s,
            )
        async with aclosing(events):
            collected = await _collect_while_connected(request, events)
    except BaseException as exc:
        close_request(ledger, root, ROUTE, error_outcome(exc))
        raise
    if collected is None:  # the client went away: its generation was stopped
        close_request(ledger, root, ROUTE, "cancelled")
        return Response(status_code=CLIENT_CLOSED_REQUEST)
    answer, outcome = collected
    close_request(ledger, root, ROUTE, success_outcome(ledger, outcome.finish_reason))
    report = answer_report(prepared, outcome, ledger, model)
    return JSONResponse(
        AskResponse(answer=answer, **report.model_dump()).model_dump(mode="json"),
        headers=timing_headers(ledger, root),
    )


async def _collect_while_connected(
    request: Request, events: AsyncGenerator[AnswerEvent, None]
) -> tuple[str, AnswerOutcome] | None:
    """``_collect``, unless the client disconnects first: then the collection is cancelled,
    which closes the pipeline's stream and so stops the backend, and the result is None."""
    collecting = asyncio.ensure_future(_collect(events))
    try:
        while True:
            done, _ = await asyncio.wait({collecting}, timeout=DISCONNECT_POLL_S)
            if done:
                return collecting.result()
            if await request.is_disconnected():
                collecting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await collecting
                return None
    finally:
        collecting.cancel()  # a no-op once done; stops the work if this request is cancelled


async def _collect(events: AsyncGenerator[AnswerEvent, None]) -> tuple[str, AnswerOutcome]:
    """The whole answer's text and how it ended."""
    parts: list[str] = []
    async for event in events:
        if isinstance(event, AnswerDone):
            return "".join(parts), event.outcome
        parts.append(event.text)
    raise RuntimeError("the answer ended without its AnswerDone")


class Drain:
    """A stream's view of the server shutting down: ``started`` is set (by sse-starlette) when
    it begins; the stream may go on for ``grace_s`` less a margin to send its last event."""

    MARGIN_S = 0.25

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.started = anyio.Event()
        self._ends_at: float | None = None

    async def next(self, events: AsyncGenerator[AnswerEvent, None]) -> AnswerEvent | None:
        """The next event, or None when the shutdown's grace runs out first."""
        following = asyncio.ensure_future(anext(events))
        try:
            if self._ends_at is None:
                shutdown = asyncio.ensure_future(self.started.wait())
                done, _ = await asyncio.wait(
                    {following, shutdown}, return_when=asyncio.FIRST_COMPLETED
                )
                shutdown.cancel()
                if following in done:
                    return following.result()
                self._ends_at = time.monotonic() + max(self.grace_s - self.MARGIN_S, 0.0)
            left = self._ends_at - time.monotonic()
            done, _ = await asyncio.wait({following}, timeout=max(left, 0.0))
            return following.result() if done else None
        finally:
            if not following.done():  # stop the answer (and the backend) before it is closed
                following.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await following


async def _events(
    event: AnswerEvent,
    events: AsyncGenerator[AnswerEvent, None],
    prepared: Prepared,
    ledger: BudgetLedger,
    root: Span,
    model: str,
    drain: Drain,
) -> AsyncIterator[dict[str, str]]:
    closed = False
    try:
        while not isinstance(event, AnswerDone):
            yield {"event": "token", "data": json.dumps({"text": event.text})}
            following = await drain.next(events)
            if following is None:  # the server is going down and the grace is over
                close_request(ledger, root, ROUTE, "cancelled")
                closed = True
                message = "the server is shutting down; the answer was cut short, ask again"
                yield {"event": "error", "data": json.dumps(error_body("shutting_down", message))}
                return
            event = following
        await events.aclose()
        outcome = event.outcome
        close_request(ledger, root, ROUTE, success_outcome(ledger, outcome.finish_reason))
        closed = True
        report = answer_report(prepared, outcome, ledger, model)
        done = report.model_dump(mode="json")
        headers = timing_headers(ledger, root)
        done["server_timing"] = headers["Server-Timing"]
        done["traceparent"] = headers.get("traceparent", "")
        yield {"event": "done", "data": json.dumps(done)}
    except InferenceError as exc:
        close_request(ledger, root, ROUTE, error_outcome(exc))
        closed = True
        kind = "backend_unavailable" if exc.status_code == 503 else "generation_failed"
        yield {"event": "error", "data": json.dumps(error_body(kind, str(exc)))}
    finally:
        # A client that went away cancels us here: closing ``events`` stops the backend.
        await events.aclose()
        if not closed:
            close_request(ledger, root, ROUTE, "cancelled")
