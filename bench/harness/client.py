"""The load generator's client: one streamed ``POST /v1/ask``, timed as its user feels it.

TTFT runs from the moment the request was due (its scheduled arrival in an open loop, the send in
a closed one) to the first ``token`` event; time to first evidence, to the ``citations`` event
that lists the passages before the answer; inter-token latency is the gap between consecutive
``token`` events; end-to-end runs to the ``done`` (or ``error``) event. The ``done`` event brings
the server's own view: per-stage ``timings_ms``, ``budget``, ``degradations`` and ``usage``
(prompt, cached and completion tokens).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from pydantic import BaseModel, Field

Outcome = Literal["ok", "http_error", "stream_error", "incomplete", "transport_error", "timeout"]


@dataclass(frozen=True)
class Target:
    """A server to drive: where it listens and the API key to send."""

    name: str
    url: str
    key: str | None = None


class RequestRecord(BaseModel):
    """One request as the client saw it, with what the server reported in its ``done`` event."""

    target: str
    index: int = Field(description="Position in the phase; the question is questions[index % n].")
    scheduled_s: float = Field(description="When it was due, seconds after its phase began.")
    start_lag_ms: float = Field(description="How late the client sent it (client saturation).")
    status: int = Field(description="HTTP status; 0 when no response arrived.")
    outcome: Outcome
    error: str | None = None
    ttft_ms: float | None = None
    evidence_ms: float | None = Field(
        default=None, description="Time to first evidence: to the ``citations`` event."
    )
    e2e_ms: float | None = None
    sent_ms: float | None = Field(
        default=None,
        description="When the request's headers were written, from when it was due: what a "
        "response took on the wire is ``e2e_ms - sent_ms``.",
    )
    body_sent_ms: float | None = Field(
        default=None,
        description="When the request's body was written, from when it was due (httpx writes "
        "the body apart from the headers: a server cannot decide before it).",
    )
    tokens: int = 0
    answer_words: int = Field(default=0, description="Words in the streamed answer.")
    answer: str = Field(default="", exclude=True)
    itl_ms_mean: float | None = None
    itl_ms_max: float | None = None
    itl_ms: list[float] = Field(default_factory=list, exclude=True)
    budget_ms: float | None = None
    within_budget: bool = Field(
        default=False, description="Finished, and end-to-end within its budget."
    )
    budget_exceeded: bool | None = Field(default=None, description="The server's own verdict.")
    degradations: list[str] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    finish_reason: str | None = None
    prompt_tokens: int | None = Field(
        default=None, description="The ``done`` event's usage: prompt tokens (None if absent)."
    )
    cached_tokens: int | None = Field(
        default=None, description="Of the prompt tokens, those served from the prefix cache."
    )
    completion_tokens: int | None = None


def make_client(*, max_connections: int = 256, timeout_s: float = 60.0) -> httpx.AsyncClient:
    """One long-lived client per load run, pooled, with explicit timeouts."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(5.0, read=timeout_s, pool=timeout_s),
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
    )


async def ask_stream(
    client: httpx.AsyncClient,
    target: Target,
    question: str,
    *,
    index: int = 0,
    due: float | None = None,
    phase_start: float | None = None,
    budget_ms: int | None = None,
    timeout_s: float = 60.0,
) -> RequestRecord:
    """Send one streamed question to ``target``; never raises for a failed request.

    ``due`` is the ``time.perf_counter()`` instant the request was meant to start (now when
    ``None``); every latency is measured from it, so a late client cannot hide queueing.
    """
    now = time.perf_counter()
    due = now if due is None else due
    phase_start = due if phase_start is None else phase_start
    record = RequestRecord(
        target=target.name,
        index=index,
        scheduled_s=round(due - phase_start, 6),
        start_lag_ms=round(max(0.0, now - due) * 1000.0, 3),
        status=0,
        outcome="incomplete",
        budget_ms=budget_ms,
    )
    payload, headers = ask_request(target, question, budget_ms)
    try:
        async with asyncio.timeout(timeout_s):
            await _exchange(client, f"{target.url}/v1/ask", payload, headers, due, record)
    except TimeoutError:
        record.outcome, record.error = "timeout", f"no answer within {timeout_s:g} s"
    except httpx.HTTPError as exc:
        record.outcome, record.error = "transport_error", f"{type(exc).__name__}: {exc}"
    _finish(record)
    return record


def ask_request(
    target: Target, question: str, budget_ms: int | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The JSON body and headers of a streamed ``POST /v1/ask`` to ``target``."""
    payload: dict[str, Any] = {"question": question, "stream": True}
    if budget_ms is not None:
        payload["budget_ms"] = budget_ms
    headers = {"Authorization": f"Bearer {target.key}"} if target.key else {}
    return payload, headers


def note_sent(record: RequestRecord, due: float) -> dict[str, Any]:
    """httpx request extensions that set ``record.sent_ms`` once the request's headers are
    written, and ``record.body_sent_ms`` once its body is (its trace hook)."""

    async def sent(event: str, info: dict[str, Any]) -> None:
        if event == "http11.send_request_headers.complete":
            record.sent_ms = _ms_since(due)
        elif event == "http11.send_request_body.complete":
            record.body_sent_ms = _ms_since(due)

    return {"trace": sent}


async def _exchange(
    client: httpx.AsyncClient,
    url: str,
    payload: dict[str, Any],
    headers: dict[str, str],
    due: float,
    record: RequestRecord,
) -> None:
    async with client.stream(
        "POST", url, json=payload, headers=headers, extensions=note_sent(record, due)
    ) as response:
        record.status = response.status_code
        if response.status_code != 200:
            await response.aread()
            record.outcome = "http_error"
            record.error = error_message(response.text)
            record.e2e_ms = _ms_since(due)
            return
        last_token: float | None = None
        event = "message"
        finished = False
        # Read on to the end of the stream (the server closes it right after the final event),
        # so that the connection returns to the pool instead of being torn down.
        async for line in response.aiter_lines():
            if finished:
                continue
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                if event == "citations" and record.evidence_ms is None:
                    record.evidence_ms = _ms_since(due)
                elif event == "token":
                    now = time.perf_counter()
                    if last_token is None:
                        record.ttft_ms = (now - due) * 1000.0
                    else:
                        record.itl_ms.append((now - last_token) * 1000.0)
                    last_token = now
                    record.tokens += 1
                    record.answer += json.loads(line[5:]).get("text", "")
                elif event in ("done", "error"):
                    record.e2e_ms = _ms_since(due)
                    _apply_final(record, event, json.loads(line[5:]))
                    finished = True


def _apply_final(record: RequestRecord, event: str, data: dict[str, Any]) -> None:
    if event == "error":
        record.outcome = "stream_error"
        record.error = error_message(json.dumps(data))
        return
    record.outcome = "ok"
    budget = data.get("budget") or {}
    if budget.get("budget_ms") is not None:
        record.budget_ms = float(budget["budget_ms"])
    if budget.get("exceeded") is not None:
        record.budget_exceeded = bool(budget["exceeded"])
    record.degradations = [str(d.get("action", d)) for d in data.get("degradations") or []]
    record.timings_ms = {str(k): float(v) for k, v in (data.get("timings_ms") or {}).items()}
    record.finish_reason = data.get("finish_reason")
    usage = data.get("usage") or {}
    for field in ("prompt_tokens", "cached_tokens", "completion_tokens"):
        if usage.get(field) is not None:
            setattr(record, field, int(usage[field]))


def _finish(record: RequestRecord) -> None:
    record.answer_words = len(record.answer.split())
    if record.itl_ms:
        record.itl_ms_mean = round(sum(record.itl_ms) / len(record.itl_ms), 4)
        record.itl_ms_max = round(max(record.itl_ms), 4)
    if record.ttft_ms is not None:
        record.ttft_ms = round(record.ttft_ms, 4)
    if record.evidence_ms is not None:
        record.evidence_ms = round(record.evidence_ms, 4)
    if record.e2e_ms is not None:
        record.e2e_ms = round(record.e2e_ms, 4)
    if record.sent_ms is not None:
        record.sent_ms = round(record.sent_ms, 4)
    if record.body_sent_ms is not None:
        record.body_sent_ms = round(record.body_sent_ms, 4)
    record.within_budget = (
        record.outcome == "ok"
        and record.e2e_ms is not None
        and (record.budget_ms is None or record.e2e_ms <= record.budget_ms)
    )


def error_message(body: str) -> str:
    """An error body's ``type: message`` (the service's JSON shape), else its first 300
    characters."""
    try:
        error = json.loads(body)["error"]
        return f"{error.get('type', 'error')}: {error.get('message', '')}"[:300]
    except (ValueError, KeyError, TypeError):
        return body[:300]


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0
