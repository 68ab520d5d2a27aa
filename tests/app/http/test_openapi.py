"""The OpenAPI document says what the service does (issue 13, finding 8): the key it takes, the
error shape it sends, the streams, ``/metrics`` as text, and the budget bounds it accepts.
``test_schemathesis.py`` checks the running service against it; these pin what it must say."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.app import build_app


@pytest.fixture(scope="module")
def doc(seeded_data_dir: Path) -> dict[str, Any]:
    app = build_app(seeded_data_dir, budget_ms_min=75, budget_ms_max=90_000, max_top_k=7)
    return app.openapi()


def test_the_bearer_key_is_the_security_scheme(doc: dict[str, Any]) -> None:
    assert doc["components"]["securitySchemes"]["ApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": doc["components"]["securitySchemes"]["ApiKey"]["description"],
    }
    paths = doc["paths"]
    assert paths["/v1/ask"]["post"]["security"] == [{"ApiKey": []}]
    assert paths["/v1/models"]["get"]["security"] == [{"ApiKey": []}]
    assert paths["/healthz"]["get"]["security"] == []
    assert paths["/readyz"]["get"]["security"] == [{}, {"ApiKey": []}]  # a key is optional


def test_errors_have_the_shape_the_service_sends(doc: dict[str, Any]) -> None:
    schemas = doc["components"]["schemas"]
    assert "HTTPValidationError" not in schemas  # FastAPI's `detail`, never sent
    assert schemas["Error"]["properties"]["error"]["required"] == ["type", "message"]
    ask = doc["paths"]["/v1/ask"]["post"]["responses"]
    for status in ("400", "401", "404", "409", "413", "415", "422", "502", "503", "504"):
        ref = ask[status]["content"]["application/json"]["schema"]["$ref"]
        assert ref == "#/components/schemas/Error", status
    assert ask["401"]["headers"]["WWW-Authenticate"]["required"] is True
    assert ask["503"]["headers"]["Retry-After"]["required"] is True
    chat = doc["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert "422" not in chat  # OpenAI answers an invalid request with 400
    assert chat["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/OpenAIError")


def test_streams_describe_their_events(doc: dict[str, Any]) -> None:
    ask = doc["paths"]["/v1/ask"]["post"]["responses"]["200"]["content"]
    events = ask["text/event-stream"]["schema"]["oneOf"]
    names = [e["properties"]["event"]["const"] for e in events]
    assert names == ["citations", "token", "replace", "done", "error"]
    assert events[2]["properties"]["data"]["contentSchema"] == {
        "$ref": "#/components/schemas/ReplaceEvent"
    }
    assert events[3]["properties"]["data"]["contentSchema"] == {
        "$ref": "#/components/schemas/DoneEvent"
    }
    citations = doc["components"]["schemas"]["CitationsEvent"]["properties"]["citations"]
    assert citations["items"] == {"$ref": "#/components/schemas/Citation"}
    assert "Citation" in doc["components"]["schemas"]
    chat = doc["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]
    assert chat["text/event-stream"]["schema"]["if"]["properties"]["data"]["const"] == "[DONE]"


def test_metrics_are_text(doc: dict[str, Any]) -> None:
    content = doc["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert set(content) == {"text/plain", "application/openmetrics-text"}


def test_bounds_are_the_configured_ones(doc: dict[str, Any]) -> None:
    body = doc["paths"]["/v1/ask"]["post"]["requestBody"]["content"]["application/json"]
    budget = body["schema"]["properties"]["budget_ms"]["anyOf"][0]
    assert (budget["minimum"], budget["maximum"]) == (75, 90_000)  # budget_ms: 0 is not allowed
    top_k = body["schema"]["properties"]["top_k"]["anyOf"][0]
    assert (top_k["minimum"], top_k["maximum"]) == (1, 7)


def test_nested_bodies_refer_to_schemas_that_exist(doc: dict[str, Any]) -> None:
    chat = doc["paths"]["/v1/chat/completions"]["post"]["requestBody"]["content"]
    assert "$defs" not in chat["application/json"]["schema"]
    assert "ChatMessage" in doc["components"]["schemas"]
