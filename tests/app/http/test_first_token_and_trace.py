"""Every answer's report says when its first token came (``budget.ttft_ms``, from arrival): the
model's first token, or, for an answer from the passages, when its text was ready; and a stream
names its trace at once (its first event, and the ``traceparent`` header), not only in ``done``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import running_app
from tests.helpers.sse import parse_sse

QUESTION = "How do I append an item to a list?"


@pytest.fixture
def app(seeded_data_dir: Path) -> Iterator[TestClient]:
    with running_app(seeded_data_dir, backend=ScriptedBackend()) as client:
        yield client


def ask(client: TestClient, auth: dict[str, str], **body: Any) -> dict[str, Any]:
    response = client.post("/v1/ask", json={"question": QUESTION, **body}, headers=auth)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def bar(answer: dict[str, Any], stage: str) -> dict[str, Any]:
    (found,) = [b for b in answer["stages"] if b["stage"] == stage]
    return found


def test_a_generated_answers_first_token_is_the_models(
    app: TestClient, auth: dict[str, str], spans: InMemorySpanExporter
) -> None:
    answer = ask(app, auth, answer_mode="generate")
    budget = answer["budget"]
    generate = bar(answer, "generate")
    assert generate["start_ms"] < budget["ttft_ms"] <= budget["spent_ms"]
    trace_id = int(answer["trace_id"], 16)
    (span,) = [
        s
        for s in spans.get_finished_spans()
        if s.name == "generate" and s.context.trace_id == trace_id
    ]
    (first,) = [e for e in span.events if e.name == "first_token"]
    assert first.attributes is not None
    assert budget["ttft_ms"] == round(float(first.attributes["ragtime.ttft_ms"]), 3)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["extract", "auto"])
def test_an_answer_from_the_passages_has_its_first_token_when_its_text_is_ready(
    seeded_data_dir: Path, auth: dict[str, str], mode: str
) -> None:
    """Extract: no model, the text is ready once extracted and moderated. Auto, with a model
    whose answer the passages do not bear out: its first token was the model's all the same."""
    backend = ScriptedBackend(["The capital of France is Paris, a city on the Seine river."])
    with running_app(seeded_data_dir, backend=backend) as client:
        answer = ask(client, auth, answer_mode=mode)
    assert answer["answer_mode"] == "extract" and answer["answer"]
    budget = answer["budget"]
    extract = bar(answer, "extract")
    assert budget["ttft_ms"] is not None and budget["ttft_ms"] <= budget["spent_ms"]
    if mode == "extract":
        assert "generate" not in answer["timings_ms"]
        assert budget["ttft_ms"] >= extract["start_ms"] + extract["spent_ms"]
    else:
        assert bar(answer, "generate")["start_ms"] < budget["ttft_ms"]


def test_an_abstention_has_its_first_token(seeded_data_dir: Path, auth: dict[str, str]) -> None:
    with running_app(
        seeded_data_dir, backend=ScriptedBackend(), answerable_min_similarity=1.0
    ) as client:
        answer = ask(client, auth, answer_mode="generate")
    assert answer["answer_mode"] == "abstain"
    assert 0 < answer["budget"]["ttft_ms"] <= answer["budget"]["spent_ms"]


def test_a_streams_first_event_names_its_trace(app: TestClient, auth: dict[str, str]) -> None:
    with app.stream(
        "POST", "/v1/ask", json={"question": QUESTION, "stream": True}, headers=auth
    ) as response:
        traceparent = response.headers["traceparent"]
        events = parse_sse(response.iter_lines())
    (name, first), done = events[0], events[-1][1]
    assert name == "citations" and first["trace_id"] == done["trace_id"]
    assert traceparent.split("-")[1] == done["trace_id"] and len(done["trace_id"]) == 32
    assert done["budget"]["ttft_ms"] is not None
    assert done["budget"]["ttft_ms"] <= done["budget"]["spent_ms"]


def test_a_chat_streams_first_chunk_names_its_trace(app: TestClient, auth: dict[str, str]) -> None:
    """In OpenAI's chunk, as an extension field beside the role (the last chunk with a choice
    names it too), and in the ``traceparent`` header."""
    body = {"model": "ragtime", "messages": [{"role": "user", "content": QUESTION}], "stream": True}
    response = app.post("/v1/chat/completions", json=body, headers=auth)
    assert response.status_code == 200, response.text
    lines = [line for line in response.text.splitlines() if line != "data: [DONE]"]
    chunks = [data for _, data in parse_sse(lines)]
    first, last = chunks[0], chunks[-1]
    assert first["choices"][0]["delta"]["role"] == "assistant"
    assert first["trace_id"] == last["trace_id"]
    assert response.headers["traceparent"].split("-")[1] == first["trace_id"]
    assert last["budget"]["ttft_ms"] is not None
