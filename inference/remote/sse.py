"""Server-sent events as the generation servers send them: the JSON ``data`` of each event, read
by a backend's ``ChunkDecoder``; each request named by a fresh id (``new_rid``)."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Protocol

import httpx

from inference.backend import GenerationDone
from inference.remote.faults import StreamError

RID_BYTES = 16
"""Request ids are ``2 * RID_BYTES`` hex digits: fixed length, so none is a prefix of another."""


def new_rid() -> str:
    return secrets.token_hex(RID_BYTES)


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
