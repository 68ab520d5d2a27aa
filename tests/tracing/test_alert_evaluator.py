"""The in-process alert evaluator against a real HTTP receiver on 127.0.0.1.

Each test gives the evaluator its own registry holding the metrics it reads, drives them, and
evaluates at chosen instants of a fake clock; the receiver records what it was sent.
"""

from __future__ import annotations

import asyncio
import math
import re
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter, Histogram

from tests.helpers.webhook_receiver import Receiver, receiving
from tracing import metrics
from tracing._alert_conditions import (
    REQUESTS,
    WATCHED,
    SampleKey,
    error_ratio,
    histogram_quantile,
)
from tracing.alerts import ZERO_TIME, AlertEvaluator, NotifierLock

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
ALERTS_YML = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "alerts.yml"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


class Metrics:
    """The metrics the evaluator reads, named as in ``tracing.metrics``, in their own registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        buckets = (0.5, 1.0, 1.5, 5.0)
        self.stage_seconds = Histogram(
            "ragtime_stage_duration_seconds", "", ["stage"], registry=self.registry
        )
        self.overruns = Counter(
            "ragtime_stage_budget_exceeded", "", ["stage"], registry=self.registry
        )
        self.ttft_over_target = Histogram(
            "ragtime_ttft_target_ratio", "", ["route"], buckets=buckets, registry=self.registry
        )
        self.requests = Counter("ragtime_requests", "", ["route", "status"], registry=self.registry)

    def stage(self, name: str, *, runs: int, overruns: int) -> None:
        for _ in range(runs):
            self.stage_seconds.labels(stage=name).observe(0.01)
        self.overruns.labels(stage=name).inc(overruns)


@pytest.fixture
def driven() -> Metrics:
    return Metrics()


EvaluatorFor = Callable[..., AlertEvaluator]


@pytest.fixture
async def evaluator_for(driven: Metrics) -> AsyncIterator[EvaluatorFor]:
    """Makes evaluators of ``driven`` posting to a URL; stops them (closing their clients) after."""
    made: list[AlertEvaluator] = []

    def make(url: str | None, **overrides: Any) -> AlertEvaluator:
        options: dict[str, Any] = {
            "registry": driven.registry,
            "webhook_url": url,
            "interval_s": 5.0,
            "window_s": 60.0,
            "for_s": 30.0,
            "cooldown_s": 600.0,
            "backoff_s": 0.05,
            "max_tries": 3,
            "clock": lambda: pytest.fail("the tests pass the time"),
        }
        options.update(overrides)
        made.append(AlertEvaluator(**options))
        return made[-1]

    yield make
    for evaluator in made:
        await evaluator.stop()


def iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + "Z"


async def test_a_stage_alert_fires_after_its_for_period_with_one_alertmanager_payload(
    receiver: Receiver, driven: Metrics, evaluator_for: EvaluatorFor
) -> None:
    evaluator = evaluator_for(receiver.url)
    await evaluator.evaluate_once(T0)
    driven.stage("generate", runs=100, overruns=10)  # 10%: over 5%
    driven.stage("search", runs=100, overruns=1)  # 1%: within
    driven.stage("rerank", runs=0, overruns=0)  # no runs: no ratio
    assert await evaluator.evaluate_once(T0 + 10) == []  # pending
    driven.stage("generate", runs=10, overruns=1)
    assert await evaluator.evaluate_once(T0 + 30) == []  # pending for 20 s of 30
    assert evaluator.firing() == [] and receiver.bodies == []

    driven.stage("generate", runs=10, overruns=1)
    sent = await evaluator.evaluate_once(T0 + 40)

    assert receiver.bodies == sent and len(sent) == 1
    body = sent[0]
    labels = {
        "alertname": "RagtimeStageBudgetViolations",
        "severity": "warning",
        "stage": "generate",
    }
    annotations = {
        "summary": "Stage generate overran its planned allocation in 10% of runs",
        "description": "Over the last 1 minute 10% of the runs of stage generate overran "
        "the allocation the plan gave them (threshold 5%).",
    }
    assert body["version"] == "4" and body["status"] == "firing"
    assert body["receiver"] == "ragtime"
    assert body["groupLabels"] == {"alertname": "RagtimeStageBudgetViolations", "stage": "generate"}
    assert body["groupKey"] == '{}:{alertname="RagtimeStageBudgetViolations", stage="generate"}'
    assert body["commonLabels"] == labels and body["commonAnnotations"] == annotations
    (alert,) = body["alerts"]
    assert alert["status"] == "firing"
    assert alert["labels"] == labels and alert["annotations"] == annotations
    assert alert["startsAt"] == iso(T0 + 10)  # when it became pending, as Prometheus has it
    assert alert["endsAt"] == ZERO_TIME
    assert re.fullmatch(r"[0-9a-f]{16}", alert["fingerprint"])
    (firing,) = evaluator.firing()
    assert firing["labels"] == labels and firing["value"] == pytest.approx(0.1)


async def test_cooldown_keeps_one_incident_to_one_message_then_it_resolves(
    receiver: Receiver, driven: Metrics, evaluator_for: EvaluatorFor
) -> None:
    evaluator = evaluator_for(receiver.url, for_s=0.0)
    await evaluator.evaluate_once(T0)
    for at in (T0 + 10, T0 + 70, T0 + 130, T0 + 400):  # still firing, within the cooldown
        driven.stage("embed", runs=20, overruns=5)
        await evaluator.evaluate_once(at)
    assert [b["status"] for b in receiver.bodies] == ["firing"]

    driven.stage("embed", runs=20, overruns=5)
    await evaluator.evaluate_once(T0 + 610)  # a cooldown after the first message: a reminder
    assert [b["status"] for b in receiver.bodies] == ["firing", "firing"]
    first, reminder = (b["alerts"][0] for b in receiver.bodies)
    assert reminder["fingerprint"] == first["fingerprint"]
    assert reminder["startsAt"] == first["startsAt"] == iso(T0 + 10)

    driven.stage("embed", runs=200, overruns=1)  # 0.5%: cleared
    await evaluator.evaluate_once(T0 + 680)
    assert [b["status"] for b in receiver.bodies] == ["firing", "firing", "resolved"]
    resolved = receiver.bodies[-1]["alerts"][0]
    assert resolved["status"] == "resolved" and resolved["endsAt"] == iso(T0 + 680)
    assert resolved["fingerprint"] == first["fingerprint"]
    assert evaluator.firing() == []
    await evaluator.evaluate_once(T0 + 700)
    assert len(receiver.bodies) == 3


async def test_of_several_processes_one_posts_and_another_takes_over_when_it_stops(
    receiver: Receiver, driven: Metrics, evaluator_for: EvaluatorFor, tmp_path: Path
) -> None:
    """Processes of one server evaluate the same metrics; only the lock's holder posts."""
    lock = str(tmp_path / "alerts.lock")
    first = evaluator_for(receiver.url, for_s=0.0, notifier=NotifierLock(lock))
    second = evaluator_for(receiver.url, for_s=0.0, notifier=NotifierLock(lock))
    for evaluator in (first, second):
        await evaluator.evaluate_once(T0)
    driven.stage("generate", runs=100, overruns=10)
    assert len(await first.evaluate_once(T0 + 10)) == 1
    assert len(await second.evaluate_once(T0 + 10)) == 1  # due there too: tracked, not posted
    assert len(receiver.bodies) == 1
    assert first.firing() and second.firing()  # GET /v1/alerts says the same in both

    await first.stop()  # its process ends: the lock is free
    driven.stage("generate", runs=100, overruns=10)
    await second.evaluate_once(T0 + 700)  # past the cooldown: posted again, by the second
    assert len(receiver.bodies) == 2


async def test_a_condition_that_clears_while_pending_sends_nothing(
    receiver: Receiver, driven: Metrics, evaluator_for: EvaluatorFor
) -> None:
    evaluator = evaluator_for(receiver.url)
    await evaluator.evaluate_once(T0)
    driven.stage("generate", runs=10, overruns=5)
    await evaluator.evaluate_once(T0 + 10)
    await evaluator.evaluate_once(T0 + 80)  # no runs in the last window: no ratio
    await evaluator.evaluate_once(T0 + 120)
    assert receiver.bodies == [] and evaluator.firing() == []


async def test_server_errors_are_retried_with_exponential_backoff(
    receiver: Receiver, driven: Metrics, evaluator_for: EvaluatorFor
) -> None:
    receiver.replies = [500, 503]
    evaluator = evaluator_for(receiver.url, for_s=0.0, backoff_s=0.1)
    await evaluator.evaluate_once(T0)
    driven.stage("generate", runs=10, overruns=5)
    await evaluator.evaluate_once(T0 + 10)

    assert len(receiver.bodies) == 3 and receiver.bodies[0] == receiver.bodies[2]
    first_gap = receiver.arrivals[1] - receiver.arrivals[0]
    second_gap = receiver.arrivals[2] - receiver.arrivals[1]
    assert first_gap >= 0.1 and second_gap >= 0.2
    driven.stage("generate", runs=10, overruns=5)
    await evaluator.evaluate_once(T0 + 20)  # delivered: the cooldown holds
    assert len(receiver.bodies) == 3


async def test_a_rejected_notification_is_not_retried_until_the_next_evaluation(
    receiver: Receiver, driven: Metrics, evaluator_for: EvaluatorFor
) -> None:
    receiver.replies = [400]
    evaluator = evaluator_for(receiver.url, for_s=0.0)
    await evaluator.evaluate_once(T0)
    driven.stage("generate", runs=10, overruns=5)
    await evaluator.evaluate_once(T0 + 10)
    assert len(receiver.bodies) == 1
    driven.stage("generate", runs=10, overruns=5)
    await evaluator.evaluate_once(T0 + 20)
    assert len(receiver.bodies) == 2
    await evaluator.evaluate_once(T0 + 30)
    assert len(receiver.bodies) == 2


async def test_a_receiver_that_is_down_raises_nothing_and_the_alert_stays_firing(
    driven: Metrics, evaluator_for: EvaluatorFor, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    evaluator = evaluator_for(f"http://127.0.0.1:{port}/alerts", for_s=0.0)
    await evaluator.evaluate_once(T0)
    driven.stage("generate", runs=10, overruns=5)
    for at in (T0 + 10, T0 + 20):  # not delivered: tried again at the next evaluation
        driven.stage("generate", runs=10, overruns=5)
        assert len(await evaluator.evaluate_once(at)) == 1
    assert [a["labels"]["stage"] for a in evaluator.firing()] == ["generate"]
    failures = [r.getMessage() for r in caplog.records if "not delivered" in r.getMessage()]
    assert len(failures) == 2 and "after 3 tries: ConnectError" in failures[0]
    await evaluator.stop()
    await evaluator.stop()  # twice is fine


async def test_ttft_and_error_ratio_match_the_prometheus_rules(
    receiver: Receiver, driven: Metrics, evaluator_for: EvaluatorFor
) -> None:
    """The same series as alerts_test.yml give the same annotations as promtool expects."""
    evaluator = evaluator_for(receiver.url, for_s=0.0, window_s=300.0)
    await evaluator.evaluate_once(T0)
    for over_target, answers in ((0.4, 40), (0.8, 50), (1.2, 10)):  # 10% late: p95 1.25
        for _ in range(answers):
            driven.ttft_over_target.labels(route="/v1/ask").observe(over_target)
    for _ in range(80):
        driven.requests.labels(route="/v1/ask", status="200").inc()
    for _ in range(10):
        driven.requests.labels(route="/v1/ask", status="503").inc()
        driven.requests.labels(route="/v1/search", status="200").inc()
    await evaluator.evaluate_once(T0 + 15)

    alerts = {a["labels"]["alertname"]: a for a in evaluator.firing()}
    assert set(alerts) == {"RagtimeTTFTP95High", "RagtimeErrorRatioHigh"}
    ttft, errors = alerts["RagtimeTTFTP95High"], alerts["RagtimeErrorRatioHigh"]
    assert ttft["labels"] == {"alertname": "RagtimeTTFTP95High", "severity": "warning"}
    assert ttft["annotations"] == {
        "summary": "First tokens later than their target: p95 at 1.25 times it",
        "description": "Over the last 5 minutes more than 5% of the answers held to a "
        "first-token target (the request's ttft_target_ms, else RAGTIME_TTFT_TARGET_MS) had "
        "their first token after it; the 95th percentile is 1.25 times the target.",
    }
    assert errors["labels"]["severity"] == "critical"
    assert errors["annotations"] == {
        "summary": "10% of requests failed with a 5xx status",
        "description": "Over the last 5 minutes 10% of HTTP requests were answered with a "
        "5xx status (threshold 5%).",
    }
    assert sorted(b["groupLabels"]["alertname"] for b in receiver.bodies) == sorted(alerts)


async def test_without_a_webhook_alerts_are_tracked_and_nothing_is_posted(
    driven: Metrics, evaluator_for: EvaluatorFor
) -> None:
    evaluator = evaluator_for(None, for_s=0.0)
    await evaluator.evaluate_once(T0)
    driven.requests.labels(route="/v1/ask", status="500").inc(3)
    assert len(await evaluator.evaluate_once(T0 + 5)) == 1
    assert len(await evaluator.evaluate_once(T0 + 10)) == 0  # cooldown: logged once
    assert [a["labels"]["alertname"] for a in evaluator.firing()] == ["RagtimeErrorRatioHigh"]
    driven.requests.labels(route="/v1/ask", status="200").inc(1000)
    resolved = await evaluator.evaluate_once(T0 + 15)
    assert [p["status"] for p in resolved] == ["resolved"] and evaluator.firing() == []


def test_client_errors_count_in_the_total_only() -> None:
    statuses = ("200", "400", "401", "413", "415", "422", "499", "503")
    increase: dict[SampleKey, float] = {
        (REQUESTS, (("route", "/v1/ask"), ("status", s))): 10.0 for s in statuses
    }
    assert error_ratio(increase) == {(): 10.0 / 80.0}
    del increase[(REQUESTS, (("route", "/v1/ask"), ("status", "503")))]
    assert error_ratio(increase) == {(): 0.0}


async def test_the_background_task_evaluates_on_its_own(
    receiver: Receiver, driven: Metrics, evaluator_for: EvaluatorFor
) -> None:
    evaluator = evaluator_for(
        receiver.url, interval_s=0.02, window_s=5.0, for_s=0.0, clock=time.time
    )
    await evaluator.start()
    await _overrun_until_posted(evaluator, receiver, driven)
    assert [b["status"] for b in receiver.bodies] == ["firing"]


async def _overrun_until_posted(
    evaluator: AlertEvaluator, receiver: Receiver, driven: Metrics
) -> None:
    """Drive a search overrun for the started ``evaluator``'s background task to post (5 s at
    most), then stop it."""
    try:
        driven.stage("search", runs=10, overruns=10)
        deadline = time.monotonic() + 5
        while not receiver.bodies and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    finally:
        await evaluator.stop()


async def test_metrics_that_cannot_be_read_at_start_do_not_stop_it(
    receiver: Receiver,
    driven: Metrics,
    evaluator_for: EvaluatorFor,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The first reading fails (another process's metrics file half made, say): the evaluator
    starts all the same, and evaluates once the metrics read again."""

    class FailsOnce:
        failed = False

        def collect(self) -> list[Any]:
            if not FailsOnce.failed:
                FailsOnce.failed = True
                raise RuntimeError("half a file")
            return []

    driven.registry.register(FailsOnce())
    evaluator = evaluator_for(
        receiver.url, interval_s=0.02, window_s=5.0, for_s=0.0, clock=time.time
    )
    await evaluator.start()
    assert evaluator.running and "could not be read at start" in caplog.text
    assert await evaluator.evaluate_once() == []  # reads again: the baseline
    await _overrun_until_posted(evaluator, receiver, driven)
    assert [b["status"] for b in receiver.bodies] == ["firing"]


@pytest.mark.parametrize(
    ("buckets", "expected"),
    [
        ({0.5: 10, 1.0: 50, 2.5: 100, math.inf: 100}, 2.35),  # interpolated in (1, 2.5]
        ({0.5: 50, 1.0: 97, 2.5: 99, math.inf: 100}, 0.5 + 0.5 * (95 - 50) / 47),
        ({1.0: 0, 2.5: 4, math.inf: 100}, 2.5),  # in +Inf: the bound below it
        ({1.0: 100, 2.5: 100, math.inf: 100}, 0.95),  # first bucket starts at 0
        ({1.0: 0, math.inf: 0}, math.nan),  # no observations
        ({1.0: 5}, math.nan),  # no +Inf bucket
    ],
)
def test_histogram_quantile_follows_promql(buckets: dict[float, float], expected: float) -> None:
    got = histogram_quantile(0.95, buckets)
    assert got == pytest.approx(expected, nan_ok=True)


def test_the_evaluator_reads_metrics_the_service_exports() -> None:
    families = {family.name for family in metrics.REGISTRY.collect()}
    for sample in WATCHED:
        family = re.sub(r"_(total|count|bucket)$", "", sample)
        assert family in families, f"{sample} is not exported by tracing.metrics"


def test_the_evaluator_defaults_match_the_prometheus_rules() -> None:
    rules = {r["alert"]: r for r in yaml.safe_load(ALERTS_YML.read_text())["groups"][0]["rules"]}
    evaluator = AlertEvaluator(registry=CollectorRegistry())
    assert set(rules) == {rule.name for rule in evaluator.rules}
    for rule in evaluator.rules:
        promql = rules[rule.name]
        assert promql["labels"]["severity"] == rule.severity
        assert promql["for"] == f"{int(evaluator.for_s // 60)}m"
        assert f"[{int(evaluator.window_s // 60)}m]" in promql["expr"]
        assert re.search(rf">\s*{rule.threshold:g}\s*$", promql["expr"].strip()), rule.name
