"""The OpenAI-compatible face: ``POST /v1/chat/completions`` and ``GET /v1/models``, so that
OpenAI clients and the chat UIs built on them use ragtime as they are.

A chat completion answers the conversation's last user message with the pipeline of
``POST /v1/ask`` (``app.http.answers``): the same budget (the ``Request-Timeout-Ms`` header, or the
``budget_ms`` extension field, or the default), passages and report. Citations, degradations,
the budget report, timings and the trace id are extension fields of the ``chat.completion``
object, and of the stream's last chunk that has a choice, with ``grounded`` (whether any passage
supports the answer) and ``attribution`` (how its citations were found). ``model`` must be one that
``GET /v1/models`` lists: ``ragtime`` or the generation backend's model, which answer alike.

Shapes are OpenAI's (sources in ``app.http.schemas.chat``): a stream is
``data: {chat.completion.chunk}`` lines, the first with the assistant's role (and the request's
``trace_id``, an extension field; the response's ``traceparent`` header says it too), the last
with the ``finish_reason`` (then, with ``stream_options.include_usage``, one with the usage and no
choice), then ``data: [DONE]``.
A failure before the first token is a plain HTTP error; one after it ends the stream with
``data: {"error": {...}}``, as OpenAI's streams do. A client that goes away stops generation.
Every error of these routes, those of auth and of the body's parsing included, leaves as
OpenAI's ``{"error": {"message", "type", "param", "code"}}``; OpenAI answers an invalid request
with 400, so the 422 of the native routes is a 400 here.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import aclosing
from typing import Any, Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from sse_starlette import EventSourceResponse

from app.http.answers import REPLACED_NOTE, AnswerStream, Finished, Replaced, answer, asked
from app.http.body import openapi_body
from app.http.deps import (
    AskKey,
    ChatBody,
    CurrentKey,
    LedgerDep,
    PipelineDep,
    ServicesDep,
    SessionDep,
    SettingsDep,
    ShutdownDep,
    readable_collection,
)
from app.http.errors import STREAM_FAILURES, InvalidField, ModelNotFound, stream_error
from app.http.schemas import (
    ChatChoice,
    ChatCompletionOut,
    ChatCompletionRequest,
    ChatMessageOut,
    ChatUsage,
    ModelList,
    ModelOut,
    PromptTokensDetails,
    RagtimeExtensions,
    Report,
)
from app.pipeline.services import Services

log = logging.getLogger("ragtime")

ROUTE = "/v1/chat/completions"
MODELS_ROUTE = "/v1/models"
SERVICE_MODEL = "ragtime"
_STARTED = int(time.time())


def openai_error(status: int, native: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A native error answer (``{"error": {"type", "message", "field"?}}``) as OpenAI's:
    ``type`` is OpenAI's class of error, ``code`` the native type (``invalid_api_key`` for a
    401, as OpenAI says it), ``param`` the field at fault."""
    error = native.get("error") if isinstance(native.get("error"), dict) else {}
    assert isinstance(error, dict)
    kind = str(error.get("type") or "error")
    if status == 422:  # OpenAI: every invalid request is a 400
        status = 400
    field = error.get("field")
    if field is None and error.get("errors"):
        field = error["errors"][0].get("field")
    if field == "body":  # the body as a whole: no one parameter is at fault
        field = None
    return status, {
        "error": {
            "message": str(error.get("message", "")),
            "type": "invalid_request_error" if status < 500 else "server_error",
            "param": field,
            "code": "invalid_api_key" if status == 401 else kind,
        }
    }


class OpenAIRoute(APIRoute):
    """A route whose every error leaves in OpenAI's shape: the app's handlers translate the
    exception as for any route (status, message, ``Retry-After``, ``WWW-Authenticate``), then
    ``openai_error`` reshapes the body. Auth and body parsing fail inside the route's
    dependencies, so this wraps the whole handler, not the endpoint alone."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:
                return await _error_response(request, exc)

        return handle


async def _error_response(request: Request, exc: Exception) -> Response:
    handlers = request.app.exception_handlers
    translate = next((handlers[c] for c in type(exc).__mro__ if c in handlers), None)
    if translate is None:
        log.exception("%s %s failed", request.method, request.url.path)
        status, body = openai_error(
            500, {"error": {"type": "internal_error", "message": "internal server error"}}
        )
        return JSONResponse(body, status_code=status)
    native = await translate(request, exc)
    status, body = openai_error(native.status_code, json.loads(bytes(native.body)))
    headers = {
        k: v for k, v in native.headers.items() if k not in ("content-length", "content-type")
    }
    return JSONResponse(body, status_code=status, headers=headers)


router = APIRouter(tags=["openai"], route_class=OpenAIRoute)


def served_models(services: Services) -> list[str]:
    """The names a request's ``model`` may give: the service's, then the backend's model."""
    names = [SERVICE_MODEL, services.backend.model]
    return [name for i, name in enumerate(names) if name and name not in names[:i]]


@router.get(MODELS_ROUTE, response_model=ModelList)
async def list_models(key: AskKey, services: ServicesDep) -> ModelList:
    """The models a chat completion may name; any of them answers with the same pipeline."""
    backend = services.backend
    owners = {SERVICE_MODEL: SERVICE_MODEL, backend.model: backend.name}
    return ModelList(
        data=[
            ModelOut(id=name, created=_STARTED, owned_by=owners[name])
            for name in served_models(services)
        ]
    )


def _finish_reason(report: Report) -> Literal["stop", "length"]:
    """OpenAI's finish reason: ``length`` for an answer cut short (its token cap, or the
    deadline), else ``stop`` (an answer the budget skipped, too: its text is empty)."""
    return "length" if report.finish_reason in ("length", "deadline") else "stop"


def _extensions(report: Report) -> RagtimeExtensions:
    return RagtimeExtensions(
        citations=report.citations,
        grounded=report.grounded,
        attribution=report.attribution,
        degradations=report.degradations,
        budget=report.budget,
        timings_ms=report.timings_ms,
        stages=report.stages,
        trace_id=report.trace_id,
        ragtime_finish_reason=report.finish_reason,
    )


def _usage(report: Report) -> ChatUsage | None:
    usage = report.usage
    if usage is None:
        return None
    return ChatUsage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.prompt_tokens + usage.completion_tokens,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=usage.cached_tokens),
    )


def _question(body: ChatCompletionRequest) -> str:
    """The conversation's last user message: 400 when there is none, or it has no text."""
    users = [m for m in body.messages if m.role == "user"]
    if not users:
        raise InvalidField("messages", "has no user message to answer")
    text = users[-1].text().strip()
    if not text:
        raise InvalidField("messages", "the last user message has no text")
    return text


@router.post(
    ROUTE,
    response_model=ChatCompletionOut,
    openapi_extra=openapi_body(ChatCompletionRequest),
)
async def chat_completions(
    request: Request,
    body: ChatBody,
    key: CurrentKey,
    ledger: LedgerDep,
    session: SessionDep,
    pipeline: PipelineDep,
    services: ServicesDep,
    settings: SettingsDep,
    shutdown: ShutdownDep,
) -> Any:
    if body.model not in served_models(services):
        raise ModelNotFound(body.model)
    caps = [c for c in (body.max_tokens, body.max_completion_tokens) if c is not None]
    stream = bool(body.stream)
    question = asked(
        settings,
        _question(body),
        collection=readable_collection(key, body.collection or settings.default_collection),
        top_k=body.top_k,
        stream=stream,
        max_output_tokens=min(caps) if caps else None,
        question_field="messages",
        answer_mode=body.answer_mode,
    )
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    if stream:
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        started = await AnswerStream.start(pipeline, question, session, ledger, ROUTE, shutdown)
        chunks = _chunks(started, completion_id, created, body.model, include_usage)
        return EventSourceResponse(
            chunks,
            headers=started.headers,
            shutdown_event=started.drain.started,
            shutdown_grace_period=started.drain.grace_s,
        )
    finished = await answer(pipeline, question, session, ledger, ROUTE, request)
    report = finished.report
    completion = ChatCompletionOut(
        id=completion_id,
        created=created,
        model=body.model,
        choices=[
            ChatChoice(
                message=ChatMessageOut(content=finished.text),
                finish_reason=_finish_reason(report),
            )
        ],
        usage=_usage(report),
        **_extensions(report).model_dump(),
    )
    return JSONResponse(completion.model_dump(mode="json"), headers=finished.headers)


async def _chunks(
    stream: AnswerStream, completion_id: str, created: int, model: str, include_usage: bool
) -> AsyncIterator[dict[str, str]]:
    """The ``data:`` events of a streamed completion, ``[DONE]`` last."""

    def chunk(choices: list[dict[str, Any]], **extra: Any) -> dict[str, str]:
        data: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": choices,
        }
        if include_usage:
            data["usage"] = None  # OpenAI: null on every chunk but the last
        data.update(extra)
        return {"data": json.dumps(data)}

    def choice(delta: dict[str, str], finish_reason: str | None = None) -> dict[str, Any]:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}

    yield chunk([choice({"role": "assistant", "content": ""})], trace_id=stream.trace_id)
    try:
        async with aclosing(stream.items()) as items:
            async for item in items:
                if isinstance(item, str):
                    yield chunk([choice({"content": item})])
                    continue
                if isinstance(item, Replaced):  # what was sent cannot be taken back: say so
                    yield chunk([choice({"content": f"{REPLACED_NOTE}{item.text}"})])
                    continue
                if not isinstance(item, Finished):
                    continue  # evidence: a chat stream is not started with it
                report = item.report
                yield chunk(
                    [choice({}, _finish_reason(report))],
                    **_extensions(report).model_dump(mode="json"),
                    server_timing=item.headers["Server-Timing"],
                    traceparent=item.headers.get("traceparent", ""),
                )
                usage = _usage(report)
                if include_usage and usage is not None:
                    yield chunk([], usage=usage.model_dump(mode="json"))
    except STREAM_FAILURES as exc:
        code, message = stream_error(exc)
        error = {"message": message, "type": "server_error", "param": None, "code": code}
        yield {"data": json.dumps({"error": error})}
        return
    yield {"data": "[DONE]"}
