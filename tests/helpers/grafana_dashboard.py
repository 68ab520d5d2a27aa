"""deploy/grafana/dashboards/ragtime.json as the tests read it: its panels' queries, with
Grafana's variables put in as Grafana would before sending them (``PanelQuery.concrete``), and
the metrics a query or an alert rule names (``metric_names``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import yaml

from tests.helpers.compose_file import ROOT

GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARDS = GRAFANA / "dashboards"
DASHBOARD_FILE = DASHBOARDS / "ragtime.json"
ALERTS_FILE = ROOT / "deploy" / "prometheus" / "alerts.yml"
#: What the tests put for Grafana's ``$__rate_interval``: at least 4 scrapes of their 1 s interval.
RATE_WINDOW = "10s"
#: A metric as a query names it: ragtime's own, or SGLang's (``sglang:...``).
METRIC = re.compile(r"(?<![\w:])(ragtime_[a-z0-9_]+|sglang:[a-z0-9_:]+)")
#: The series a histogram or a summary exports besides its family's name.
HISTOGRAM_SERIES = re.compile(r"_(bucket|count|sum)$")


def dashboard_json() -> dict[str, Any]:
    data = json.loads(DASHBOARD_FILE.read_text())
    assert isinstance(data, dict)
    return data


def variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The dashboard's template variables, by name."""
    return {variable["name"]: variable for variable in dashboard["templating"]["list"]}


def fill(expr: str, dashboard: dict[str, Any]) -> str:
    """``expr`` with Grafana's variables put in: each template variable as "All" selected sends
    it (its ``allValue``), ``$__rate_interval`` as ``RATE_WINDOW``."""
    expr = expr.replace("$__rate_interval", RATE_WINDOW)
    for name, variable in variables(dashboard).items():
        expr = re.sub(rf"\$(\{{{name}\}}|{name}\b)", variable["allValue"], expr)
    return expr


@dataclass(frozen=True)
class PanelQuery:
    """One query of one panel, as Grafana sends it and as the tests send it."""

    panel: str
    ref_id: str
    expr: str
    concrete: str
    """The expression with the dashboard's variables put in, as Grafana would before sending."""


def panel_queries(dashboard: dict[str, Any]) -> list[PanelQuery]:
    queries = []
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            concrete = fill(expr, dashboard)
            assert "$" not in concrete, f"{panel['title']}: a variable the tests cannot fill"
            queries.append(PanelQuery(panel["title"], target["refId"], expr, concrete))
    return queries


def metric_names(expr: str) -> set[str]:
    """The series ``expr`` names (``ragtime_ttft_seconds_bucket``, ``sglang:token_usage``)."""
    return set(METRIC.findall(expr))


def family(series: str) -> str:
    """A series' metric: a histogram's buckets, count and sum are one metric."""
    return HISTOGRAM_SERIES.sub("", series)


def alert_rules() -> list[dict[str, Any]]:
    """Every rule of deploy/prometheus/alerts.yml."""
    groups = yaml.safe_load(ALERTS_FILE.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"]]


def metrics_without_panel(rules: list[dict[str, Any]], dashboard: dict[str, Any]) -> set[str]:
    """The metrics an alert rule reads that no panel's query reads (a histogram's series as
    one metric): an alert an operator could not see coming, nor see why it fired."""
    shown = {
        family(name) for query in panel_queries(dashboard) for name in metric_names(query.expr)
    }
    read = {family(name) for rule in rules for name in metric_names(str(rule["expr"]))}
    return read - shown
