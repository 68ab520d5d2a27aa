"""The streams in the OpenAPI document: the Server-Sent Events ``/v1/ask`` and
``/v1/chat/completions`` send with ``"stream": true``, their schemas (OpenAPI 3.1: a stream's
``schema`` describes one event) and their descriptions."""

from __future__ import annotations

import copy
from typing import Any

from app.http.openapi_errors import NATIVE_ERROR, OPENAI_ERROR


def _event(name: str | None, data: dict[str, Any]) -> dict[str, Any]:
    """One Server-Sent Event as OpenAPI 3.1 describes a stream's items: its fields, with the
    JSON its ``data`` holds as ``contentSchema``."""
    payload = {"type": "string", "contentMediaType": "application/json", "contentSchema": data}
    if name is None:
        return {"type": "object", "required": ["data"], "properties": {"data": payload}}
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {"event": {"const": name}, "data": payload},
    }


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


#: The components the events refer to, beside ``Report`` (which ``DoneEvent`` extends).
STREAM_SCHEMAS: dict[str, Any] = {
    "CitationsEvent": {
        "title": "CitationsEvent",
        "type": "object",
        "required": ["trace_id", "citations"],
        "properties": {
            "trace_id": {
                "type": "string",
                "description": "The request's trace id (32 hex digits), at once: `done` says it "
                "again, and the response's `traceparent` header.",
            },
            "citations": {
                "type": "array",
                "items": {"$ref": "#/components/schemas/Citation"},
                "description": "The passages the answer is written from, in label order, "
                "before its first token: none cited yet (`done` says which are).",
            },
        },
    },
    "TokenEvent": {
        "title": "TokenEvent",
        "type": "object",
        "required": ["text"],
        "properties": {"text": {"type": "string", "description": "The next piece of answer."}},
    },
    "ReplaceEvent": {
        "title": "ReplaceEvent",
        "type": "object",
        "required": ["text"],
        "properties": {
            "text": {
                "type": "string",
                "description": "The answer, instead of the tokens sent: in `auto`, the passages' "
                "own answer when the model's was cut short or not borne out by them.",
            }
        },
    },
    "ChatCompletionChunk": {
        "title": "ChatCompletionChunk",
        "type": "object",
        "description": "OpenAI's `chat.completion.chunk`; the first also carries `trace_id`, the "
        "last with a choice the extension fields of `ChatCompletionOut` (citations, budget, "
        "...), `server_timing` and `traceparent`.",
        "required": ["id", "object", "created", "model", "choices"],
        "properties": {
            "id": {"type": "string"},
            "object": {"const": "chat.completion.chunk"},
            "created": {"type": "integer"},
            "model": {"type": "string"},
            "choices": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["index", "delta", "finish_reason"],
                    "properties": {
                        "index": {"type": "integer"},
                        "delta": {
                            "type": "object",
                            "properties": {
                                "role": {"const": "assistant"},
                                "content": {"type": "string"},
                            },
                        },
                        "logprobs": {"type": "null"},
                        "finish_reason": {"enum": ["stop", "length", None]},
                    },
                },
            },
            "usage": {"anyOf": [{"$ref": "#/components/schemas/ChatUsage"}, {"type": "null"}]},
            "trace_id": {
                "type": "string",
                "description": "The request's trace id (32 hex digits), an extension field of "
                "the first chunk and of the last with a choice.",
            },
        },
    },
}
DONE_EVENT_SCHEMA: dict[str, Any] = {
    "title": "DoneEvent",
    "allOf": [
        _ref("Report"),
        {
            "type": "object",
            "required": ["server_timing", "traceparent"],
            "properties": {
                "server_timing": {"type": "string"},
                "traceparent": {"type": "string"},
            },
        },
    ],
}


ASK_EVENT_SCHEMA: dict[str, Any] = {
    "oneOf": [
        _event("citations", _ref("CitationsEvent")),
        _event("token", _ref("TokenEvent")),
        _event("replace", _ref("ReplaceEvent")),
        _event("done", _ref("DoneEvent")),
        _event("error", _ref(NATIVE_ERROR)),
    ]
}
CHAT_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["data"],
    "if": {"properties": {"data": {"const": "[DONE]"}}},
    "else": _event(None, {"anyOf": [_ref("ChatCompletionChunk"), _ref(OPENAI_ERROR)]}),
}

ASK_EVENTS = (
    'Server-Sent Events, with `"stream": true`: one `event: citations` as soon as the passages '
    "are ready (a `CitationsEvent`: the evidence, before the first token, and the trace id), "
    'then `event: token` events whose data is a `TokenEvent` (`{"text": ...}`), in `auto` maybe '
    "one `event: replace` (a `ReplaceEvent`: the answer instead of the tokens sent), then one "
    "`event: done` whose data is the report (the JSON answer less its text, as `Report`, plus "
    "`server_timing` and `traceparent`); or, when generation fails or the server shuts down "
    "after the passages were sent, one `event: error` whose data is an `Error`."
)
CHAT_EVENTS = (
    'Server-Sent Events, with `"stream": true`, as OpenAI streams them: `data:` lines each '
    "holding a `chat.completion.chunk` (the first carries the `trace_id`; the last with a "
    "choice carries `finish_reason` and the extension fields; with "
    "`stream_options.include_usage`, one more with the usage and no choice), then "
    '`data: [DONE]`; a failure after the first chunk ends the stream with `data: {"error": '
    "{...}}` (an `OpenAIError`)."
)


def add_stream(responses: dict[str, Any], events: str, event: dict[str, Any]) -> None:
    """``text/event-stream`` beside JSON; ``event`` is the schema of each event (OpenAPI 3.1:
    the stream's ``schema`` describes one event)."""
    ok = responses["200"]
    ok["description"] = "The answer as JSON; or, streamed, " + events
    ok["content"]["text/event-stream"] = {"schema": copy.deepcopy(event)}
