"""Parse a Server-Sent Events body into (event, data) pairs."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def parse_sse(lines: Iterable[str]) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    event, data = "message", list[str]()
    for line in lines:
        line = line.rstrip("\r")
        if not line:
            if data:
                events.append((event, json.loads("\n".join(data))))
            event, data = "message", []
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
    if data:
        events.append((event, json.loads("\n".join(data))))
    return events
