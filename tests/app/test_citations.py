"""Citations on every answer, at the HTTP boundary: how each was found (``by``), whether the
answer is ``grounded``, on the JSON answer, the stream's ``done`` event and the OpenAI face; and
attribution skipped, and said so, when the budget has no time left for it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.http.report import answer_report
from app.pipeline import Pipeline
from app.pipeline.budget_engine import build_budget_engine
from app.pipeline.events import AnswerOutcome, Prepared
from app.stages import Answered
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import make_settings, running_app, services_of_doubles
from tests.helpers.spans import attributes
from tests.helpers.sse import parse_sse
from tracing import BudgetLedger
from tracing.budget import BudgetSession

QUESTION = "How do I append an item to a list?"
UNSUPPORTED = "The capital of France is Paris, a city on the Seine river."


@pytest.fixture
def app(seeded_data_dir: Path) -> Iterator[tuple[TestClient, ScriptedBackend]]:
    backend = ScriptedBackend()
    with running_app(seeded_data_dir, backend=backend) as client:
        yield client, backend


def first_passage_sentence(client: TestClient, auth: dict[str, str]) -> str:
    """A prose sentence of the passage the question's prompt puts first (``[1]``)."""
    hits = client.post("/v1/search", json={"query": QUESTION, "k": 4}, headers=auth).json()
    text = " ".join(hits["passages"][0]["text"].split())
    sentence = next(s for s in text.split(". ") if len(s.split()) >= 6 and ">>>" not in s)
    return sentence + "."


def ask(client: TestClient, auth: dict[str, str], **extra: Any) -> dict[str, Any]:
    response = client.post("/v1/ask", json={"question": QUESTION, **extra}, headers=auth)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_an_answer_without_labels_cites_the_passage_that_supports_it(
    app: tuple[TestClient, ScriptedBackend], auth: dict[str, str], spans: InMemorySpanExporter
) -> None:
    client, backend = app
    backend.deltas = [first_passage_sentence(client, auth), " " + UNSUPPORTED]
    body = ask(client, auth)
    assert body["attribution"] == "attributed" and body["grounded"] is True
    cited = [c for c in body["citations"] if c["cited"]]
    assert [c["label"] for c in cited] == [1]
    assert cited[0]["by"] == "attributed" and cited[0]["support"] >= 0.6
    assert all(c["by"] is None and c["support"] is None for c in body["citations"][1:])
    assert "attribute" in body["timings_ms"]
    [span] = [s for s in spans.get_finished_spans() if s.name == "attribute"]
    attrs = attributes(span)
    assert attrs["ragtime.attribution.method"] == "attributed"
    assert attrs["ragtime.attribution.sentences"] == 2
    assert attrs["ragtime.attribution.unsupported"] == 1
    assert attrs["ragtime.attribution.grounded"] is True  # judged in the stage, on its span
    new, supported = attrs["ragtime.grounding.new_terms"], attrs["ragtime.grounding.supported"]
    assert isinstance(new, int) and isinstance(supported, int) and new >= supported > 0
    assert "ragtime.budget.allocated_ms" in attrs  # charged to the budget as its own stage


def test_the_model_labels_are_cited_by_the_model(
    app: tuple[TestClient, ScriptedBackend], auth: dict[str, str]
) -> None:
    client, backend = app
    backend.deltas = ["Use it to add the item at the end", " [2]."]
    body = ask(client, auth)
    assert body["attribution"] == "model" and body["grounded"] is True
    backend.deltas = ["Append an item to a list", " [2]."]  # the question said back
    echo = ask(client, auth)
    assert echo["attribution"] == "model" and echo["grounded"] is False
    assert [(c["label"], c["cited"], c["by"]) for c in body["citations"]][:3] == [
        (1, False, None),
        (2, True, "model"),
        (3, False, None),
    ]


def test_an_answer_no_passage_supports_is_not_grounded(
    app: tuple[TestClient, ScriptedBackend], auth: dict[str, str]
) -> None:
    client, backend = app
    backend.deltas = [UNSUPPORTED]
    body = ask(client, auth)
    assert body["grounded"] is False and body["attribution"] == "unattributed"
    assert body["citations"] and not any(c["cited"] for c in body["citations"])


def test_the_stream_done_event_says_whether_the_answer_is_grounded(
    app: tuple[TestClient, ScriptedBackend], auth: dict[str, str]
) -> None:
    client, backend = app
    backend.deltas = [UNSUPPORTED]
    with client.stream(
        "POST", "/v1/ask", json={"question": QUESTION, "stream": True}, headers=auth
    ) as response:
        events = parse_sse(response.iter_lines())
    [done] = [data for event, data in events if event == "done"]
    assert done["grounded"] is False and done["attribution"] == "unattributed"
    backend.deltas = [first_passage_sentence(client, auth)]
    with client.stream(
        "POST", "/v1/ask", json={"question": QUESTION, "stream": True}, headers=auth
    ) as response:
        events = parse_sse(response.iter_lines())
    [done] = [data for event, data in events if event == "done"]
    assert done["grounded"] is True
    assert [c["by"] for c in done["citations"] if c["cited"]] == ["attributed"]


def test_the_stream_sends_its_evidence_before_the_first_token(
    app: tuple[TestClient, ScriptedBackend], auth: dict[str, str]
) -> None:
    """The passages reach the reader while the model writes: a ``citations`` event first, none
    cited yet; the ``done`` event then says which the answer cites, for the same passages."""
    client, backend = app
    backend.deltas = ["Use ", "append ", "[1]."]
    with client.stream(
        "POST", "/v1/ask", json={"question": QUESTION, "stream": True}, headers=auth
    ) as response:
        events = parse_sse(response.iter_lines())
    names = [event for event, _ in events]
    assert names[0] == "citations" and names.count("citations") == 1
    assert names[1:] == ["token"] * (len(names) - 2) + ["done"]
    evidence = events[0][1]["citations"]
    assert [c["label"] for c in evidence] == list(range(1, len(evidence) + 1))
    assert not any(c["cited"] for c in evidence)
    assert all(c["source"] and c["score"] > 0 for c in evidence)
    done = events[-1][1]
    assert [(c["label"], c["id"]) for c in done["citations"]] == [
        (c["label"], c["id"]) for c in evidence
    ]
    assert [c["label"] for c in done["citations"] if c["cited"]] == [1]


def test_the_openai_face_carries_grounded_whole_and_streamed(
    app: tuple[TestClient, ScriptedBackend], auth: dict[str, str]
) -> None:
    client, backend = app
    backend.deltas = [UNSUPPORTED]
    body = {"model": "ragtime", "messages": [{"role": "user", "content": QUESTION}]}
    whole = client.post("/v1/chat/completions", json=body, headers=auth)
    assert whole.status_code == 200, whole.text
    assert whole.json()["grounded"] is False and whole.json()["attribution"] == "unattributed"
    backend.deltas = ["It adds the item at the end", " [1]."]
    streamed = client.post("/v1/chat/completions", json={**body, "stream": True}, headers=auth)
    chunks = [
        json.loads(line[5:])
        for line in streamed.text.splitlines()
        if line.startswith("data:") and "[DONE]" not in line
    ]
    [last] = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert last["grounded"] is True and last["attribution"] == "model"
    assert last["citations"][0]["by"] == "model"


def test_the_openapi_schema_describes_by_and_grounded(
    app: tuple[TestClient, ScriptedBackend],
) -> None:
    schemas = app[0].get("/openapi.json").json()["components"]["schemas"]
    assert set(schemas["Citation"]["properties"]) >= {"by", "support", "cited"}
    for name in ("AskResponse", "ChatCompletionOut"):
        assert {"grounded", "attribution"} <= set(schemas[name]["properties"])
        assert {"grounded", "attribution"} <= set(schemas[name]["required"])


async def test_no_time_left_skips_attribution_and_says_so(seeded_data_dir: Path) -> None:
    services = services_of_doubles(make_settings(seeded_data_dir))
    await services.start()
    try:
        budget = build_budget_engine(services.settings, services.costs)
        pipeline = Pipeline(services)
        asking = BudgetSession(budget, BudgetLedger(15_000), route="/v1/ask")
        events = pipeline.answer(QUESTION, "demo", 4, asking)
        async with aclosing(events):
            prepared = await anext(events)
        assert isinstance(prepared, Prepared)
        spent = BudgetLedger(1)
        session = BudgetSession(budget, spent, route="/v1/ask", k=4, rerank_available=False)
        time.sleep(0.005)  # the whole budget is gone
        outcome = AnswerOutcome(text="Lists hold items in order and grow with append.", model="m")
        answered = Answered(QUESTION, outcome.text, prepared.prompt.passages)
        outcome.attribution = await session.run(services.stages.attribute, answered)
    finally:
        await services.close()
    report = answer_report(prepared, outcome, spent)
    # Grounding is judged however the citations were found: a few set operations.
    assert report.attribution == "skipped" and report.grounded is not None
    assert not any(c.cited or c.by for c in report.citations)
    [degradation] = [d for d in report.degradations if d.stage == "attribute"]
    assert degradation.action == "attribution_skipped"
    assert "citations not attributed" in degradation.reason
