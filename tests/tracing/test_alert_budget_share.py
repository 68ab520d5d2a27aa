"""The in-process budget alert (``RagtimeBudgetViolations``): the share of a route's admitted
requests that broke their budget, from the same series, with the same annotations, as
deploy/prometheus/alerts_test.yml gives promtool."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter

from tracing._alert_conditions import (
    BUDGET_BREACHES,
    OUTCOMES,
    REFUSED,
    Increase,
    SampleKey,
    budget_violation_ratios,
)
from tracing.alerts import AlertEvaluator

T0 = 1_800_000_000.0
ASK = (("route", "/v1/ask"),)


def increase(
    outcomes: dict[str, float], refused: float = 0.0, **breaches: float
) -> dict[SampleKey, float]:
    """A window's growth of /v1/ask's series: outcomes by name, door refusals, breaches."""
    grown: dict[SampleKey, float] = {
        (OUTCOMES, (("outcome", o), *ASK)): n for o, n in outcomes.items()
    }
    grown[(REFUSED, (("reason", "budget_infeasible"), *ASK))] = refused
    grown[(REFUSED, (("reason", "overloaded"), *ASK))] = 300.0  # front door: no outcome
    for kind, n in {"late": 0.0, "504": 0.0, **breaches}.items():
        grown[(BUDGET_BREACHES, (("kind", kind), *ASK))] = n
    return grown


@pytest.mark.parametrize(
    ("grown", "share"),
    [
        (increase({"ok": 92, "deadline": 6, "degraded": 2}, late=2, **{"504": 6}), 0.08),
        (increase({"ok": 100}), 0.0),  # every request in its budget: 0, not absent
        # Door refusals leave both sides; callers' errors count nowhere.
        (increase({"ok": 40, "deadline": 560, "rejected": 1000}, 550, **{"504": 10}), 0.2),
        (increase({"ok": 50, "deadline": 550}, 550), 0.0),
    ],
)
def test_the_share_follows_the_promql(grown: Increase, share: float) -> None:
    assert budget_violation_ratios(grown) == {ASK: pytest.approx(share)}


def test_no_admitted_request_gives_no_share() -> None:
    assert budget_violation_ratios(increase({"rejected": 10})) == {}
    assert budget_violation_ratios(increase({"deadline": 5}, 5)) == {}


async def test_the_evaluator_fires_with_promtools_annotations() -> None:
    registry = CollectorRegistry()
    outcomes = Counter("ragtime_request_outcomes", "", ["route", "outcome"], registry=registry)
    broke = Counter("ragtime_budget_exceeded", "", ["route", "kind"], registry=registry)
    refused = Counter("ragtime_admission_refused", "", ["route", "reason"], registry=registry)
    evaluator = AlertEvaluator(registry=registry, for_s=0.0, window_s=300.0)
    refused.labels(route="/v1/ask", reason="budget_infeasible")  # started at 0
    await evaluator.evaluate_once(T0)
    outcomes.labels(route="/v1/ask", outcome="ok").inc(92)
    outcomes.labels(route="/v1/ask", outcome="deadline").inc(8)
    broke.labels(route="/v1/ask", kind="504").inc(6)
    broke.labels(route="/v1/ask", kind="late").inc(2)
    await evaluator.evaluate_once(T0 + 15)
    (alert,) = evaluator.firing()
    assert alert["labels"] == {
        "alertname": "RagtimeBudgetViolations",
        "severity": "critical",
        "route": "/v1/ask",
    }
    assert alert["annotations"] == {
        "summary": "8% of /v1/ask requests broke their budget",
        "description": "Over the last 5 minutes 8% of the requests admitted to /v1/ask ended "
        "after their budget ran out or were answered 504 (threshold 5%).",
    }
    await evaluator.stop()
