"""A real Prometheus server for tests: Debian's ``prometheus`` (``make test`` installs the package
where it is missing, beside promtool), started on a free port of 127.0.0.1 with the config and
rule files a test gives it and its storage in a temporary directory; stopped when the block ends.

``PrometheusServer`` asks it what Grafana's Prometheus data source asks: ``query_range``, the
range query a time-series panel runs, over ``/api/v1/query_range``. ``deploy_config`` and
``deploy_rules`` give it deploy/prometheus/'s own config and rules, pointed at a test's servers.
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.helpers.ports import free_port
from tests.helpers.processes import ServerProcess, installed, stop, wait_answering

PROMETHEUS = "prometheus"
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def deploy_config(served: Mapping[str, str], alertmanager: str | None = None) -> dict[str, Any]:
    """deploy/prometheus/prometheus.yml, each job pointed at its server in ``served`` (job name:
    URL; every job must have one), every interval 1 s (``rate()`` needs two samples in its
    window), and what fires sent to ``alertmanager`` (a URL), or nowhere."""
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config.pop("alerting")
    if alertmanager is not None:
        target = alertmanager.split("//")[1]
        config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [target]}]}]}
    left = dict(served)
    for job in config["scrape_configs"]:
        job["static_configs"] = [{"targets": [left.pop(job["job_name"]).split("//")[1]]}]
    assert not left, f"prometheus.yml has no job for {sorted(left)}"
    assert isinstance(config, dict)
    return config


def deploy_rules(for_: str) -> str:
    """deploy/prometheus/alerts.yml with every rule's ``for`` set to ``for_`` (the real rules
    wait 1 to 5 minutes in pending, longer than a test runs). The conditions, thresholds and
    windows stay the real ones: an alert that fires has really held."""
    rules = yaml.safe_load((DEPLOY / "alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule["for"] = for_
    return yaml.safe_dump(rules, sort_keys=False)


def prometheus_path() -> str | None:
    """The ``prometheus`` binary, or None where it is not installed."""
    return installed(PROMETHEUS)


class PrometheusServer(ServerProcess):
    """A running Prometheus: its URL and its log."""

    def api(self, path: str, **params: str) -> Any:
        """The ``data`` of a successful answer of ``/api/v1/PATH``; fails on an error status."""
        response = httpx.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        body = response.json()
        assert response.status_code == 200 and body.get("status") == "success", (
            f"{path} {params}: {response.status_code} {response.text[:500]}"
        )
        return body["data"]

    def query_range(self, expr: str, *, since_s: float, step_s: float = 1.0) -> list[Any]:
        """The series ``expr`` gives over the last ``since_s`` seconds, one point per step."""
        end = time.time()
        data = self.api(
            "query_range", query=expr, start=str(end - since_s), end=str(end), step=str(step_s)
        )
        assert data["resultType"] == "matrix", data
        return list(data["result"])

    def targets_up(self) -> dict[str, bool]:
        """Each active scrape target's job: whether its last scrape succeeded."""
        active = self.api("targets", state="active")["activeTargets"]
        return {target["labels"]["job"]: target["health"] == "up" for target in active}


def finite_points(series: list[Any]) -> int:
    """How many of the points of a range query's series are numbers (not NaN or infinite): what a
    panel can draw. ``histogram_quantile`` over no observations gives NaN, a panel with a gap."""
    return sum(1 for one in series for _, value in one["values"] if math.isfinite(float(value)))


@contextmanager
def prometheus_serving(
    workdir: Path, config: Mapping[str, Any], rule_files: Mapping[str, str] | None = None
) -> Iterator[PrometheusServer]:
    """Prometheus running ``config`` (a prometheus.yml as a mapping) for the block, with each
    of ``rule_files`` (name: text) written beside its config, where ``rule_files:`` names them."""
    binary = prometheus_path()
    assert binary is not None, "prometheus is not installed (make test installs it)"
    workdir.mkdir(parents=True, exist_ok=True)
    for name, text in (rule_files or {}).items():
        (workdir / name).write_text(text)
    config_file = workdir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    port = free_port()
    args = [binary, f"--config.file={config_file}", f"--storage.tsdb.path={workdir / 'data'}"]
    args += [f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"]
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, cwd=workdir)
    server = PrometheusServer(f"http://127.0.0.1:{port}", log, process)
    try:
        wait_answering(f"{server.url}/-/ready", process, server.log_tail, what="prometheus")
        yield server
    finally:
        stop(process)
