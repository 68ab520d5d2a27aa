"""An API key never leaves the request that carries it: not in a log record, a span attribute or
event, a metric label, a response body or header, whatever the request's fate (served, 401, 403,
404, 422, 429, the key put in the query string)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import create_key, running_app


def _span_texts(exporter: InMemorySpanExporter) -> list[str]:
    texts: list[str] = []
    for span in exporter.get_finished_spans():
        texts.append(span.name)
        texts.extend(f"{k}={v!s}" for k, v in (span.attributes or {}).items())
        for event in span.events:
            texts.append(event.name)
            texts.extend(f"{k}={v!s}" for k, v in (event.attributes or {}).items())
    return texts


def test_a_key_appears_in_no_log_span_metric_or_response(
    seeded_data_dir: Path, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    secret = create_key(seeded_data_dir, "secrecy", scopes=["ask"], collections=["demo"])
    token = secret.removeprefix("rt_")
    auth = {"Authorization": f"Bearer {secret}"}
    wrong = {"Authorization": f"Bearer {secret}x"}
    responses = []
    caplog.set_level(logging.DEBUG)
    with running_app(
        seeded_data_dir, backend=ScriptedBackend(), rate_limit_per_s=0.01, rate_limit_burst=12
    ) as client:
        ask = {"question": "How do I sort a list?"}
        chat = {"model": "ragtime", "messages": [{"role": "user", "content": ask["question"]}]}
        responses += [
            client.post("/v1/ask", json=ask, headers=auth),
            client.post("/v1/ask", json={**ask, "stream": True}, headers=auth),
            client.post("/v1/search", json={"query": "sort a list"}, headers=auth),
            client.post(f"/v1/search?api_key={secret}", json={"query": "x"}, headers=auth),
            client.post(f"/v1/search?token={secret}", json={"query": "x"}),  # 401
            client.post("/v1/ask", json=ask, headers=wrong),  # 401
            client.post("/v1/chat/completions", json=chat, headers=wrong),  # 401, OpenAI's shape
            client.post("/v1/chat/completions", json=chat, headers=auth),
            client.post("/v1/chat/completions", json={**chat, "stream": True}, headers=auth),
            client.get("/v1/alerts", headers=auth),  # 403
            client.post("/v1/ask", json={**ask, "collection": "x"}, headers=auth),  # 404
            client.post("/v1/ask", json={"question": secret}, headers=auth),  # moderation/answer
            client.post("/v1/ask", content=b"{", headers=auth),  # 415
        ]
        while responses[-1].status_code != 429:  # the burst of 12 is spent
            responses.append(client.get("/v1/collections", headers=auth))
            assert len(responses) < 30
        metrics = client.get("/metrics").text
    statuses = {r.status_code for r in responses}
    assert {200, 401, 403, 404, 415, 429} <= statuses, statuses
    for response in responses:
        shown = response.text + repr(dict(response.headers))
        if response.request.content and secret.encode() in response.request.content:
            continue  # the question holds the key: its answer may quote it, as any question
        assert token not in shown, (response.status_code, shown)
    assert token not in metrics
    # The service's records (the test client logs its own requests, URLs and all).
    logged = [r.getMessage() for r in caplog.records if not r.name.startswith("httpx")]
    assert logged and all(token not in line for line in logged)
    assert [t for t in _span_texts(spans) if token in t] == []
    assert any("ragtime.auth.key_id=" in text for text in _span_texts(spans))
    assert any("api_key=[redacted]" in text for text in _span_texts(spans))  # masked, not gone
