"""``POST /v1/ask``: an answer with citations, as JSON or as Server-Sent Events.

Streaming: once the passages are ready, a ``citations`` event lists them (labels, sources,
scores: the evidence, before the first token) with the request's trace id (the response's
``traceparent`` header says it too); then ``token`` events carry text deltas, then one
``done`` event carries the report (the JSON answer minus its text, saying which passages the
answer cites). In ``auto`` mode a ``replace`` event may come before ``done``: its ``text`` is the
answer instead of the tokens sent (the passages' own, when the model's fell short; the report's
degradations say why). Everything before the passages are ready (auth, the body, moderation,
retrieval, the budget's refusals) fails as a plain HTTP error; a failure after, before or after
the first token, is an ``error`` event with the body the HTTP error would have had.

A client that disconnects, streaming or not, stops its generation. On shutdown a stream goes on
for ``RAGTIME_SHUTDOWN_GRACE_S``, then ends with an ``error`` event of type ``shutting_down``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from app.http.answers import AnswerStream, Evidence, Finished, Replaced, answer, asked
from app.http.body import openapi_body
from app.http.deps import (
    AskBody,
    CurrentKey,
    LedgerDep,
    PipelineDep,
    SessionDep,
    SettingsDep,
    ShutdownDep,
    readable_collection,
)
from app.http.errors import STREAM_FAILURES, error_body, stream_error
from app.http.schemas import AskRequest, AskResponse

router = APIRouter(tags=["answers"])
ROUTE = "/v1/ask"


@router.post(ROUTE, response_model=AskResponse, openapi_extra=openapi_body(AskRequest))
async def ask(
    request: Request,
    body: AskBody,
    key: CurrentKey,
    ledger: LedgerDep,
    session: SessionDep,
    pipeline: PipelineDep,
    settings: SettingsDep,
    shutdown: ShutdownDep,
) -> Any:
    question = asked(
        settings,
        body.question,
        collection=readable_collection(key, body.collection or settings.default_collection),
        top_k=body.top_k,
        stream=body.stream,
        answer_mode=body.answer_mode,
    )
    if body.stream:
        stream = await AnswerStream.start(
            pipeline, question, session, ledger, ROUTE, shutdown, evidence_first=True
        )
        return EventSourceResponse(
            _events(stream),
            headers=stream.headers,
            shutdown_event=stream.drain.started,
            shutdown_grace_period=stream.drain.grace_s,
        )
    finished = await answer(pipeline, question, session, ledger, ROUTE, request)
    return JSONResponse(
        AskResponse(answer=finished.text, **finished.report.model_dump()).model_dump(mode="json"),
        headers=finished.headers,
    )


def token_event(text: str) -> bytes:
    """A ``token`` event, byte for byte as sse-starlette encodes ``{"event": "token", "data":
    ...}`` (CRLF line ends, one ``data:`` line: JSON escapes line breaks), without its
    per-event encoder: one event per token."""
    return b"event: token\r\ndata: " + json.dumps({"text": text}).encode() + b"\r\n\r\n"


async def _events(stream: AnswerStream) -> AsyncIterator[dict[str, str] | bytes]:
    try:
        async with aclosing(stream.items()) as items:
            async for item in items:
                if isinstance(item, Evidence):
                    cited = [c.model_dump(mode="json") for c in item.citations]
                    evidence = {"trace_id": stream.trace_id, "citations": cited}
                    yield {"event": "citations", "data": json.dumps(evidence)}
                elif isinstance(item, Replaced):
                    yield {"event": "replace", "data": json.dumps({"text": item.text})}
                elif isinstance(item, Finished):
                    done = item.report.model_dump(mode="json")
                    done["server_timing"] = item.headers["Server-Timing"]
                    done["traceparent"] = item.headers.get("traceparent", "")
                    yield {"event": "done", "data": json.dumps(done)}
                else:
                    yield token_event(item)
    except STREAM_FAILURES as exc:
        yield {"event": "error", "data": json.dumps(error_body(*stream_error(exc)))}
