"""Errors are mapped once, at the HTTP boundary (issue 57 §2): each package's error carries the
status and type the API answers with, and ``app/http/errors.py`` turns it into the response, so
nothing below the HTTP layer translates (``tests/test_package_graph.py`` forbids the import)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.http.errors import install_error_handlers, stream_error
from app.keys.ratelimit import RateLimited
from retrieval import InvalidFilter
from tracing.budget import BudgetInfeasible, DeadlinePassed, TargetSaturated

RAISED: dict[str, Exception] = {
    "infeasible": BudgetInfeasible(900.0, 300.0),
    "deadline": DeadlinePassed("no answer token came before the deadline"),
    "saturated": TargetSaturated("the queue at llama.cpp is full"),
    "limited": RateLimited(2.0, 4, 1.2),
    "filter": InvalidFilter("kind", "this collection holds no 'pdf' files"),
}


@pytest.fixture(scope="module")
def client() -> TestClient:
    app = FastAPI()
    install_error_handlers(app, retry_after_s=7)

    @app.get("/raise/{name}")
    async def raise_it(name: str) -> None:
        raise RAISED[name]

    return TestClient(app)


@pytest.mark.parametrize(
    ("name", "status", "kind", "headers"),
    [
        ("infeasible", 504, "deadline_exceeded", {}),
        ("deadline", 504, "deadline_exceeded", {}),
        ("saturated", 503, "overloaded", {"retry-after": "7"}),
        ("limited", 429, "rate_limited", {"retry-after": "2"}),
        ("filter", 422, "invalid_request", {}),
    ],
)
def test_each_error_leaves_with_its_own_status_and_type(
    client: TestClient, name: str, status: int, kind: str, headers: dict[str, str]
) -> None:
    response = client.get(f"/raise/{name}")
    assert response.status_code == status
    error = response.json()["error"]
    assert error["type"] == kind and error["message"] == str(RAISED[name])
    assert {k: response.headers[k] for k in headers} == headers
    if name == "filter":
        assert error["field"] == "kind"


def test_a_stream_already_begun_says_the_budget_error_in_its_type() -> None:
    assert stream_error(DeadlinePassed("cut")) == ("deadline_exceeded", "cut")
    assert stream_error(TargetSaturated("full")) == ("overloaded", "full")
