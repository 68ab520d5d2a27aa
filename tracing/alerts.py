"""Alerts without Prometheus: the conditions of ``deploy/prometheus/alerts.yml``, in-process.

Every ``interval_s`` an ``AlertEvaluator`` snapshots the process's metrics registry and compares
it with the snapshot of ``window_s`` ago (or the oldest one, while the process is younger than
the window): the share of each route's admitted requests that broke their budget, the share of
each stage's runs that overran the allocation the plan gave them, the answers' first token
against their target, and the share of 5xx answers. A condition over its threshold makes an
alert *pending*; once it has held for ``for_s`` the alert is *firing*, and when it clears it is
*resolved*.

A firing alert is posted to the webhook in the shape Alertmanager's webhook receiver sends (one
notification per alert, as the shipped Alertmanager route groups by alertname, stage and route);
it is posted again only if it is still firing ``cooldown_s`` later, so one incident is one
message. A resolved notice follows when it clears. Deliveries are retried with exponential
backoff for a bounded number of tries; one that fails is tried again at the next evaluation.

The evaluator runs as a background task of the app, never on a request's path, and never raises
into the app: failures are logged and the next evaluation goes on.

In a server of several processes every process evaluates the metrics of all of them
(``tracing.metrics.scrape_registry``), so ``GET /v1/alerts`` says the same whichever answers,
and one of them posts: the one holding ``NotifierLock``, an exclusive lock on a file of the
processes' shared metrics directory. The others only track the alerts. When the holder exits
the system frees its lock and another process takes it at its next evaluation.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import logging
import time
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

import httpx
from prometheus_client import CollectorRegistry

from tracing._alert_conditions import AlertRule, Labels, Snapshot, budget_rules
from tracing.metrics import scrape_registry, shared_metrics_path

log = logging.getLogger(__name__)

ZERO_TIME = "0001-01-01T00:00:00Z"  # Alertmanager's endsAt for an alert still firing
#: The labels a notification groups by: deploy/alertmanager/alertmanager.yml's route's group_by.
GROUP_BY = ("alertname", "stage", "route")


def _rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


@dataclass
class _Alert:
    """One alert instance: a rule and the label set it breached for."""

    key: tuple[str, Labels]  # (alertname, the series' own labels)
    rule: AlertRule
    labels: dict[str, str]
    active_since: float
    value: float
    annotations: dict[str, str]
    state: Literal["pending", "firing", "resolved"] = "pending"
    resolved_at: float | None = None
    notified_at: float | None = None  # the last firing notification the webhook accepted

    @property
    def fingerprint(self) -> str:
        text = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def as_alertmanager(self) -> dict[str, Any]:
        status = "resolved" if self.state == "resolved" else "firing"
        ended = self.resolved_at
        return {
            "status": status,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "startsAt": _rfc3339(self.active_since),
            "endsAt": ZERO_TIME if ended is None else _rfc3339(ended),
            "generatorURL": "",
            "fingerprint": self.fingerprint,
        }


class NotifierLock:
    """Whether this process is the one that posts the alerts: always with one process
    (``path`` ``None``); else the one that holds an exclusive ``flock`` on ``path``, taken when
    free and kept for the process's life (or until ``release``)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._held: TextIO | None = None

    def held(self) -> bool:
        if self.path is None or self._held is not None:
            return True
        file = open(self.path, "a")  # noqa: SIM115 (kept open: the lock lives with it)
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            file.close()
            return False
        self._held = file
        return True

    def release(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held.close()


class AlertEvaluator:
    """Evaluates the alert rules over the registry's recent history and notifies a webhook.

    ``registry`` defaults to the server's metrics (every process's, in a server of several);
    ``notifier`` to the lock that picks the one process that posts; ``clock`` (wall seconds) and
    ``transport`` are there for tests. Without ``webhook_url``, or without the lock, the
    evaluator still tracks alerts for ``firing()`` and logs each transition.
    """

    def __init__(
        self,
        *,
        registry: CollectorRegistry | None = None,
        notifier: NotifierLock | None = None,
        webhook_url: str | None = None,
        interval_s: float = 15.0,
        window_s: float = 300.0,
        for_s: float = 300.0,
        cooldown_s: float = 3600.0,
        budget_violation_ratio: float = 0.05,
        stage_violation_ratio: float = 0.05,
        error_ratio: float = 0.05,
        receiver: str = "ragtime",
        timeout: httpx.Timeout | None = None,
        max_tries: int = 4,
        backoff_s: float = 0.5,
        clock: Callable[[], float] = time.time,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if interval_s <= 0 or window_s <= 0 or for_s < 0 or cooldown_s < 0 or max_tries < 1:
            raise ValueError("alert intervals must be positive and max_tries at least 1")
        self.registry = registry if registry is not None else scrape_registry()
        self.notifier = notifier or NotifierLock(shared_metrics_path("alerts.lock"))
        self.webhook_url = webhook_url
        self.interval_s = interval_s
        self.window_s = window_s
        self.for_s = for_s
        self.cooldown_s = cooldown_s
        self.rules = budget_rules(
            budget_violation_ratio=budget_violation_ratio,
            stage_violation_ratio=stage_violation_ratio,
            error_ratio_max=error_ratio,
        )
        self.receiver = receiver
        self.timeout = timeout or httpx.Timeout(5.0, connect=2.0)
        self.max_tries = max_tries
        self.backoff_s = backoff_s
        self._clock = clock
        self._transport = transport
        self._history: deque[Snapshot] = deque()
        self._alerts: dict[tuple[str, Labels], _Alert] = {}
        self._client: httpx.AsyncClient | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        """Take the first snapshot and start evaluating every ``interval_s`` in the background.
        A first snapshot that cannot be read is logged, and the first evaluation takes it: the
        process starts all the same (its start failing would stop a server of several)."""
        if self._task is not None:
            return
        try:
            self._remember(Snapshot.take(self.registry, self._clock()))
        except Exception:
            log.exception(
                "alerts: the metrics could not be read at start; the first evaluation will"
            )
        self._task = asyncio.create_task(self._run(), name="ragtime-alerts")

    async def stop(self) -> None:
        """Stop evaluating and close the webhook client; safe to call twice."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()
        self.notifier.release()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def firing(self) -> list[dict[str, Any]]:
        """The alerts firing now, in Alertmanager's alert shape plus their current ``value``."""
        return [
            {**alert.as_alertmanager(), "value": alert.value}
            for alert in self._alerts.values()
            if alert.state == "firing"
        ]

    async def evaluate_once(self, now: float | None = None) -> list[dict[str, Any]]:
        """Evaluate every rule at ``now`` (default: the clock) and send what is due.

        Returns the notifications that were due (sent or not). The first evaluation of an
        evaluator that was not started only records a snapshot to compare later ones with.
        """
        async with self._lock:
            now = self._clock() if now is None else now
            snapshot = Snapshot.take(self.registry, now)
            baseline = self._remember(snapshot)
            increase = snapshot.increase_since(baseline)
            for rule in self.rules:
                self._update(rule, rule.breaches(increase), now)
            due = self._due(now)
            payloads = [self._payload(alert) for alert in due]
            # Without a webhook the log is the notification; without the lock another process
            # posts it.
            delivered = [True] * len(due)
            if self.webhook_url and due and self.notifier.held():
                delivered = await asyncio.gather(*(self._post(p) for p in payloads))
            self._settle(due, delivered, now)
            return payloads

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.evaluate_once()
            except Exception:
                log.exception("alert evaluation failed; the next one runs in %ss", self.interval_s)

    def _remember(self, snapshot: Snapshot) -> Snapshot:
        """Keep ``snapshot``; return the newest one at least a window older (else the oldest)."""
        self._history.append(snapshot)
        boundary = snapshot.at - self.window_s
        while len(self._history) > 1 and self._history[1].at <= boundary:
            self._history.popleft()
        return self._history[0]

    def _update(self, rule: AlertRule, breaches: dict[Labels, float], now: float) -> None:
        for labels_key, value in breaches.items():
            labels = {"alertname": rule.name, "severity": rule.severity, **dict(labels_key)}
            annotations = rule.annotate(rule, labels, value, self.window_s)
            key = (rule.name, labels_key)
            alert = self._alerts.get(key)
            if alert is None or alert.state == "resolved":  # a new incident
                alert = self._alerts[key] = _Alert(key, rule, labels, now, value, annotations)
            alert.value, alert.annotations = value, annotations
            if alert.state == "pending" and now - alert.active_since >= self.for_s:
                alert.state = "firing"
                log.warning("alert firing: %s %s", rule.name, annotations["summary"])
        for key, alert in list(self._alerts.items()):
            if key[0] != rule.name or key[1] in breaches or alert.state == "resolved":
                continue
            if alert.state == "pending":
                del self._alerts[key]
            else:
                alert.state, alert.resolved_at = "resolved", now
                log.warning("alert resolved: %s %s", rule.name, alert.labels)

    def _due(self, now: float) -> list[_Alert]:
        """Firing alerts not yet notified, or last notified a cooldown ago; resolved notices.

        A resolved alert is dropped without a notice if its firing was never delivered, and
        its notice is given up once it has failed for a cooldown.
        """
        due = []
        for key, alert in list(self._alerts.items()):
            if alert.state == "firing":
                if alert.notified_at is None or now - alert.notified_at >= self.cooldown_s:
                    due.append(alert)
            elif alert.state == "resolved":
                assert alert.resolved_at is not None
                if alert.notified_at is None or now - alert.resolved_at > self.cooldown_s:
                    del self._alerts[key]
                else:
                    due.append(alert)
        return due

    def _settle(self, due: list[_Alert], delivered: list[bool], now: float) -> None:
        for alert, ok in zip(due, delivered, strict=True):
            if not ok:
                continue  # due again at the next evaluation
            if alert.state == "firing":
                alert.notified_at = now
            elif self._alerts.get(alert.key) is alert:
                del self._alerts[alert.key]

    def _payload(self, alert: _Alert) -> dict[str, Any]:
        """Alertmanager's webhook body (version 4) for a group of this one alert."""
        body = alert.as_alertmanager()
        group = {k: v for k, v in alert.labels.items() if k in GROUP_BY}
        group_key = ", ".join(f'{k}="{v}"' for k, v in sorted(group.items()))
        return {
            "version": "4",
            "groupKey": f"{{}}:{{{group_key}}}",
            "truncatedAlerts": 0,
            "status": body["status"],
            "receiver": self.receiver,
            "groupLabels": group,
            "commonLabels": body["labels"],
            "commonAnnotations": body["annotations"],
            "externalURL": "",
            "alerts": [body],
        }

    def _http(self) -> httpx.AsyncClient:
        """The one client for every delivery, made on first use and closed by ``stop()``."""
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout, transport=self._transport)
        return self._client

    async def _post(self, payload: dict[str, Any]) -> bool:
        """POST ``payload``, retrying 5xx, 429 and transport errors with exponential backoff."""
        assert self.webhook_url is not None
        client = self._http()
        name = payload["commonLabels"]["alertname"]
        delay = self.backoff_s
        for attempt in range(1, self.max_tries + 1):
            try:
                response = await client.post(self.webhook_url, json=payload)
            except httpx.HTTPError as exc:
                retry, problem = True, f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    return True
                status = response.status_code
                retry, problem = status >= 500 or status == 429, f"HTTP {status}"
            if not retry or attempt == self.max_tries:
                log.warning(
                    "alert webhook: %s (%s) not delivered after %d tries: %s",
                    name,
                    payload["status"],
                    attempt,
                    problem,
                )
                return False
            await asyncio.sleep(delay)
            delay *= 2
        return False  # not reached: the loop returns on its last try
