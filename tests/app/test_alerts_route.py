"""``GET /v1/alerts`` through the app: the evaluator runs in the lifespan over the real metrics."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import app_state, running_app
from tracing import metrics

STAGE = "test.alerts"  # a stage of this test only, so that no other test's traffic counts


def test_get_alerts_lists_a_firing_alert(
    seeded_data_dir: Path, auth: dict[str, str], span_exporter: InMemorySpanExporter
) -> None:
    settings: dict[str, Any] = {
        "alert_interval_s": 0.05,
        "alert_window_s": 60.0,
        "alert_for_s": 0.0,
    }
    with running_app(seeded_data_dir, backend=ScriptedBackend(), **settings) as client:
        assert client.get("/v1/alerts").status_code == 401
        assert client.get("/v1/alerts", headers=auth).json() == {"alerts": []}

        for _ in range(20):
            metrics.STAGE_SECONDS.labels(stage=STAGE).observe(0.01)
        metrics.STAGE_BUDGET_EXCEEDED.labels(stage=STAGE).inc(5)  # 25% of its runs
        deadline = time.monotonic() + 10
        alerts: list[dict[str, Any]] = []
        while not alerts and time.monotonic() < deadline:
            time.sleep(0.05)
            response = client.get("/v1/alerts", headers=auth)
            assert response.status_code == 200
            alerts = [a for a in response.json()["alerts"] if a["labels"].get("stage") == STAGE]

        assert len(alerts) == 1, "the evaluator in the lifespan never fired"
        alert = alerts[0]
        assert alert["status"] == "firing" and alert["value"] == 0.25
        assert alert["labels"] == {
            "alertname": "RagtimeStageBudgetViolations",
            "severity": "warning",
            "stage": STAGE,
        }
        assert alert["annotations"]["summary"] == (
            f"Stage {STAGE} overran its planned allocation in 25% of runs"
        )
        evaluator = app_state(client).alerts
        assert evaluator.running
    assert not evaluator.running  # stopped with the app
