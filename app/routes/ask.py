"""``POST /v1/ask``: an answer with citations, as JSON or as Server-Sent Events.

Streaming: ``token`` events carry text deltas, then one ``done`` event carries the report (the
JSON answer minus its text), or an ``error`` event if generation fails after the first token.
Everything before the first token (retrieval, prompt, the backend starting) fails as a plain
HTTP error, so a caller never receives a stream that was doomed from the start.

A client that goes away stops its generation, streamed or not: a stream's generator is closed
when its response is cancelled; a JSON answer is collected while the request's ``receive`` is
watched for ``http.disconnect``, and the collection is cancelled when it comes (a 499 nobody
reads). On shutdown a live stream may run on for ``shutdown_grace_s``, then it ends with an
``error`` event of type ``shutting_down``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from opentelemetry import trace
from opentelemetry.trace import Span
from sse_starlette import EventSourceResponse

from app.admission import SHUTTING_DOWN
from app.body import openapi_body
from app.deps import AskBody, CurrentKey, LedgerDep, PipelineDep, SettingsDep
from app.errors import ClientGone, error_body
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
            grace_s = settings.shutdown_grace_s
            shutdown = anyio.Event()  # set by sse_starlette when the server begins to stop
            return EventSourceResponse(
                _events(first, events, prepared, ledger, root, model, (shutdown, grace_s)),
                shutdown_event=shutdown,
                # Past our own grace, time to send the error event before being cancelled.
                shutdown_grace_period=grace_s + 2.0,
            )
        async with aclosing(events):
            answer, outcome = await _collect_while_connected(request, events)
    except BaseException as exc:
        close_request(ledger, root, ROUTE, error_outcome(exc))
        raise
    close_request(ledger, root, ROUTE, success_outcome(ledger, outcome.finish_reason))
    report = answer_report(prepared, outcome, ledger, model)
    return JSONResponse(
        AskResponse(answer=answer, **report.model_dump()).model_dump(mode="json"),
        headers=timing_headers(ledger, root),
    )


async def _collect(events: AsyncGenerator[AnswerEvent, None]) -> tuple[str, AnswerOutcome]:
    """The whole answer's text and how it ended."""
    parts: list[str] = []
    async for event in events:
        if isinstance(event, AnswerDone):
            return "".join(parts), event.outcome
        parts.append(event.text)
    raise RuntimeError("the answer ended without its AnswerDone")


class _ShuttingDown(Exception):
    """The server is stopping and the stream's grace period is over."""


async def _collect_while_connected(
    request: Request, events: AsyncGenerator[AnswerEvent, None]
) -> tuple[str, AnswerOutcome]:
    """``_collect(events)``, cancelled when the client disconnects (``ClientGone``): closing
    ``events`` then stops the backend, as it does for a stream."""
    collect = asyncio.ensure_future(_collect(events))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait((collect, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not collect.done():
            collect.cancel()
            # Let the cancellation run through the pipeline before ``events`` is closed.
            await asyncio.wait((collect,))
    if collect.cancelled():
        raise ClientGone("the client went away before its answer was ready")
    return collect.result()


async def _disconnected(request: Request) -> None:
    """Returns when the client has disconnected (the body has been read whole by now)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _events(
    event: AnswerEvent,
    events: AsyncGenerator[AnswerEvent, None],
    prepared: Prepared,
    ledger: BudgetLedger,
    root: Span,
    model: str,
    shutdown: tuple[anyio.Event, float],
) -> AsyncIterator[dict[str, str]]:
    closed = False
    try:
        cut_at: float | None = None  # on shutdown, the answer may run on for the grace period
        while not isinstance(event, AnswerDone):
            yield {"event": "token", "data": json.dumps({"text": event.text})}
            if not shutdown[0].is_set():
                event = await anext(events)
                continue
            now = asyncio.get_running_loop().time()
            cut_at = now + shutdown[1] if cut_at is None else cut_at
            try:
                event = await asyncio.wait_for(anext(events), max(cut_at - now, 0.0))
            except TimeoutError:
                raise _ShuttingDown from None
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
    except _ShuttingDown:
        await events.aclose()  # stops the backend
        close_request(ledger, root, ROUTE, "cancelled")
        closed = True
        message = "the server is shutting down: the answer was cut short"
        yield {"event": "error", "data": json.dumps(error_body(SHUTTING_DOWN, message))}
    finally:
        # A client that went away cancels us here: closing ``events`` stops the backend.
        await events.aclose()
        if not closed:
            close_request(ledger, root, ROUTE, "cancelled")
