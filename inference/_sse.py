"""Server-sent events as the generation servers send them: the JSON ``data`` of each event."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from inference._faults import StreamError


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
