"""The client ``ragtime eval answers`` asks a running ragtime server with: it uploads a set's
documents into one collection (``POST /v1/collections/{name}/documents``; unchanged documents
are not embedded again), then asks each question through ``POST /v1/ask`` as a stream, timing
the first token and the whole answer as the client sees them.

The server may run any generation backend (llama.cpp, SGLang, an OpenAI-compatible server): the
client sees only ragtime's API. A server that cannot be reached is ``Unreachable``; a refused
upload is ``UploadFailed``; a question the server refuses or cuts is scored with its status
(an older server refuses an ``answer_mode`` it does not know with 422).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from app.evaluation.dataset import Case
from app.evaluation.scoring import Scored

#: Documents per upload request, and the most bytes one request carries.
UPLOAD_FILES = 8
UPLOAD_BYTES = 4 << 20


class Unreachable(Exception):
    """No server answers at the URL (the cause: httpx's error)."""


class UploadFailed(Exception):
    """The server refused the set's documents: the message holds its answer."""


class AnswersClient:
    """Asks one server, with one key, into one collection."""

    def __init__(
        self,
        url: str,
        key: str,
        collection: str,
        *,
        timeout_s: float = 300.0,
        transport: httpx.BaseTransport | None = None,
    ):
        self.url = url.rstrip("/")
        self.collection = collection
        self._http = httpx.Client(
            timeout=httpx.Timeout(10.0, read=timeout_s),
            headers={"Authorization": f"Bearer {key}"},
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AnswersClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def upload(self, files: list[Path]) -> int:
        """Upload the documents in batches; the chunks the server holds for them."""
        chunks = 0
        for batch in _batches(files):
            parts = [("file", (p.name, p.read_bytes())) for p in batch]
            response = self._call(
                "POST", f"/v1/collections/{self.collection}/documents", files=parts
            )
            if response.status_code != 201:
                raise UploadFailed(
                    f"uploading {batch[0].name}..{batch[-1].name} into "
                    f"{self.collection!r}: {response.status_code} {_message(response)}"
                )
            chunks += int(response.json().get("chunks", 0))
        return chunks

    def ask(
        self,
        case: Case,
        *,
        budget_ms: int | None,
        ttft_target_ms: int | None,
        answer_mode: str | None = None,
    ) -> Scored:
        """Ask one question as a stream; its answer, report and timings, scored later. Each
        of the budget, the TTFT target and the answer mode is sent only when given, so an
        older server that knows no ``answer_mode`` still answers a run at its own mode."""
        payload: dict[str, Any] = {
            "question": case.question,
            "collection": self.collection,
            "stream": True,
        }
        if answer_mode is not None:
            payload["answer_mode"] = answer_mode
        if budget_ms is not None:
            payload["budget_ms"] = budget_ms
        if ttft_target_ms is not None:
            payload["ttft_target_ms"] = ttft_target_ms
        started = time.perf_counter()
        parts: list[str] = []
        scored = Scored(case, status=0)
        try:
            with self._http.stream("POST", f"{self.url}/v1/ask", json=payload) as response:
                if response.status_code != 200:
                    response.read()
                    scored.status = response.status_code
                    scored.error = _message(response)
                else:
                    for event, data in _events(response.iter_lines()):
                        if event == "token":
                            if scored.ttft_ms is None:
                                scored.ttft_ms = (time.perf_counter() - started) * 1000
                            parts.append(data["text"])
                        elif event == "replace":  # auto's answer instead of what was sent
                            parts = [data["text"]]
                        elif event == "done":
                            scored.status, scored.report = 200, data
                        elif event == "error":
                            error = data.get("error", {})
                            scored.status = _STREAM_STATUS.get(error.get("type", ""), 500)
                            scored.error = error.get("message", "")
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise Unreachable(self.url) from exc
        except httpx.TransportError as exc:
            scored.error = f"the connection broke: {exc}"
        scored.answer = "".join(parts)
        scored.total_ms = (time.perf_counter() - started) * 1000
        return scored

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.request(method, f"{self.url}{path}", **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise Unreachable(self.url) from exc


#: The HTTP status each error event of a stream stands for (app/http/errors.py's types).
_STREAM_STATUS = {
    "deadline_exceeded": 504,
    "backend_unavailable": 503,
    "backend_busy": 503,
    "overloaded": 503,
    "shutting_down": 503,
    "generation_failed": 502,
}


def _events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """A server-sent event stream's (event, JSON data) pairs."""
    event = ""
    for line in lines:
        if line.startswith("event:"):
            event = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            yield event, json.loads(line.split(":", 1)[1])


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:200]


def _batches(files: list[Path]) -> Iterator[list[Path]]:
    batch: list[Path] = []
    size = 0
    for path in files:
        length = path.stat().st_size
        if batch and (len(batch) >= UPLOAD_FILES or size + length > UPLOAD_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(path)
        size += length
    if batch:
        yield batch
