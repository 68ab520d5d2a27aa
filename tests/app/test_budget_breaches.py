"""What the budget alerts read (issue 59 §2): each request's broken budget counted once and by
how, a 504 refused at the door left out; each answer's first token against its target; every
series the alerts divide by present, at 0, before the first violation."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.http.report import budget_breach, refused_at_the_door
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import app_state, running_app
from tracing import BudgetLedger, metrics
from tracing.budget import BudgetInfeasible, DeadlinePassed, GenerationPrior

# 1 ms per prompt token, 10 per output token: plans are predictable (tests/app/test_budget_engine)
RATES = GenerationPrior(fixed_ms=0.0, prefill_ms_per_token=1.0, decode_ms_per_token=10.0)
QUESTION = {"question": "What is a list comprehension?"}
WORDS = [f"w{i} " for i in range(200)]
ROUTE = "/v1/ask"


def sample(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def breaches() -> dict[str, float]:
    return {
        kind: sample("ragtime_budget_exceeded_total", route=ROUTE, kind=kind)
        for kind in metrics.BUDGET_BREACHES
    }


def ask(client: TestClient, auth: dict[str, str], **body: Any) -> Any:
    app_state(client).budget.cost.seed({"rerank": 5.0}, RATES)
    return client.post(ROUTE, json={**QUESTION, **body}, headers=auth)


def test_a_budget_no_plan_can_meet_is_a_refusal_not_a_breach(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    before, refused = breaches(), "ragtime_admission_refused_total"
    refusals = sample(refused, route=ROUTE, reason="budget_infeasible")
    with running_app(seeded_data_dir, backend=ScriptedBackend(WORDS)) as client:
        response = ask(client, auth, budget_ms=60)
    assert response.status_code == 504, response.text
    assert sample(refused, route=ROUTE, reason="budget_infeasible") == refusals + 1
    assert breaches() == before


def test_a_504_after_admission_is_a_breach_counted_once(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    """Five tokens a second and a 1 s budget: the deadline cuts the answer before it is useful
    (tests/app/test_budget_engine): a 504 after the request's work ran, whole or streamed."""
    before = breaches()
    backend = ScriptedBackend(WORDS, delay_s=0.2)
    with running_app(
        seeded_data_dir, backend=backend, degradation_policy=False, max_output_tokens=200
    ) as client:
        whole = ask(client, auth, budget_ms=1000)
        streamed = ask(client, auth, budget_ms=1000, stream=True)
    assert whole.status_code == 504 and streamed.status_code == 200  # its error event says 504
    after = breaches()
    assert after["504"] == before["504"] + 2
    assert after["late"] == before["late"]  # over its budget too, but counted once


def test_an_answer_within_its_budget_breaks_nothing(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    before = breaches()
    budgets = sample("ragtime_request_budget_seconds_count", route=ROUTE)
    with running_app(seeded_data_dir, backend=ScriptedBackend(WORDS[:8])) as client:
        body = ask(client, auth, budget_ms=20_000).json()
    assert body["budget"]["exceeded"] is False
    assert breaches() == before
    assert sample("ragtime_request_budget_seconds_count", route=ROUTE) == budgets + 1


def test_how_a_request_breaks_its_budget() -> None:
    """Once, by how: ended after its budget ran out (late), or a 504 after admission; never a
    504 for a budget no plan could meet, refused before any stage but the key check."""
    within = BudgetLedger(10_000.0)
    late = BudgetLedger(100.0, started_at=time.perf_counter() - 1.0)
    assert budget_breach(within) is None and budget_breach(late) == "late"
    assert budget_breach(within, DeadlinePassed("cut")) == "504"
    assert budget_breach(late, DeadlinePassed("cut")) == "504"

    at_the_door = BudgetLedger(60.0)
    at_the_door.charge("auth", 1.0)
    refusal = BudgetInfeasible(needed_ms=500.0, remaining_ms=59.0)
    assert refused_at_the_door(at_the_door, refusal)
    assert budget_breach(at_the_door, refusal) is None
    # No plan fit what retrieval left: admitted, it did work, and its caller got a 504.
    after_retrieval = BudgetLedger(600.0)
    for stage in ("auth", "embed", "search"):
        after_retrieval.charge(stage, 100.0)
    assert not refused_at_the_door(after_retrieval, refusal)
    assert budget_breach(after_retrieval, refusal) == "504"


def test_each_answer_held_to_a_target_observes_its_first_token_over_it(
    seeded_data_dir: Path, auth: dict[str, str]
) -> None:
    """The request's ``ttft_target_ms``, else the service's; none: nothing is observed."""
    count = "ragtime_ttft_target_ratio_count"
    before = sample(count, route=ROUTE)
    with running_app(seeded_data_dir, backend=ScriptedBackend(WORDS[:8])) as client:
        untargeted = ask(client, auth, budget_ms=20_000)
        assert sample(count, route=ROUTE) == before
        own = ask(client, auth, budget_ms=20_000, ttft_target_ms=15_000)
        streamed = ask(client, auth, budget_ms=20_000, ttft_target_ms=15_000, stream=True)
    assert untargeted.status_code == own.status_code == streamed.status_code == 200
    assert sample(count, route=ROUTE) == before + 2
    with running_app(
        seeded_data_dir, backend=ScriptedBackend(WORDS[:8]), ttft_target_ms=15_000
    ) as client:
        assert ask(client, auth, budget_ms=20_000).status_code == 200  # the service's target
    assert sample(count, route=ROUTE) == before + 3
    assert sample("ragtime_ttft_target_ratio_bucket", route=ROUTE, le="1.0") == before + 3


def test_series_start_at_zero() -> None:
    """Every label set given at start-up is exported at 0 before anything happens to it."""
    metrics.count_from_zero(["/test/zero"], ["/test/zero"], ["test.zero"])

    def exported(name: str, **labels: str) -> float | None:
        return metrics.REGISTRY.get_sample_value(name, {"route": "/test/zero", **labels})

    for kind in metrics.BUDGET_BREACHES:
        assert exported("ragtime_budget_exceeded_total", kind=kind) == 0.0
    for outcome in metrics.OUTCOMES:
        assert exported("ragtime_request_outcomes_total", outcome=outcome) == 0.0
    for reason in metrics.REFUSALS:
        assert exported("ragtime_admission_refused_total", reason=reason) == 0.0
    assert exported("ragtime_ttft_target_ratio_count") == 0.0
    stage = {"stage": "test.zero"}
    assert metrics.REGISTRY.get_sample_value("ragtime_stage_budget_exceeded_total", stage) == 0.0


def test_the_app_starts_the_question_routes_at_zero(seeded_data_dir: Path) -> None:
    with running_app(seeded_data_dir, backend=ScriptedBackend()) as client:
        exposed = client.get("/metrics").text
    for route in ("/v1/ask", "/v1/chat/completions", "/v1/search"):
        assert f'ragtime_budget_exceeded_total{{kind="504",route="{route}"}}' in exposed
        reason = f'ragtime_admission_refused_total{{reason="budget_infeasible",route="{route}"}}'
        assert reason in exposed
    assert 'ragtime_stage_budget_exceeded_total{stage="generate"}' in exposed
    assert 'ragtime_ttft_target_ratio_count{route="/v1/chat/completions"}' in exposed
