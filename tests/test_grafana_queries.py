"""The dashboard's queries against the alerts and the metrics (issue 59 §3), without a server:
every metric an alert reads has a panel; the template variables for instance and route exist as
Grafana reads them, and narrow every query of ragtime's metrics that carry those labels.

Whether each metric a panel names is really exported, and each query has data, is checked
against a real Prometheus scraping a real ragtime (tests/test_grafana.py)."""

from __future__ import annotations

import copy
import re

from prometheus_client.metrics import MetricWrapperBase

from tests.helpers.grafana_dashboard import (
    alert_rules,
    dashboard_json,
    metrics_without_panel,
    panel_queries,
    variables,
)
from tracing import metrics

#: A selector of one of ragtime's metrics: its name and its braces, if any.
SELECTOR = re.compile(r"(?<![\w:])(ragtime_[a-z0-9_]+)(\{[^}]*\})?")
SERIES_SUFFIX = re.compile(r"_(total|bucket|count|sum)$")


def label_names() -> dict[str, tuple[str, ...]]:
    """Each of ragtime's metrics (by its name without suffix): the labels it is exported with.
    prometheus_client keeps them in ``_labelnames``, its own attribute."""
    return {
        wrapper._name: tuple(wrapper._labelnames)
        for wrapper in vars(metrics).values()
        if isinstance(wrapper, MetricWrapperBase)
    }


def test_every_metric_an_alert_reads_has_a_panel() -> None:
    assert metrics_without_panel(alert_rules(), dashboard_json()) == set()


def test_an_alert_on_a_metric_no_panel_shows_is_caught() -> None:
    """The check above can fail: a rule reading what no panel shows, or a panel gone."""
    dashboard = dashboard_json()
    made_up = {"alert": "Made", "expr": "rate(ragtime_made_up_total[5m]) > 0"}
    assert metrics_without_panel([*alert_rules(), made_up], dashboard) == {"ragtime_made_up_total"}
    without = copy.deepcopy(dashboard)
    without["panels"] = [
        panel
        for panel in without["panels"]
        if not any("ragtime_ttft_target_ratio" in t["expr"] for t in panel["targets"])
    ]
    assert metrics_without_panel(alert_rules(), without) == {"ragtime_ttft_target_ratio"}


def test_the_dashboard_has_variables_for_instance_and_route() -> None:
    dashboard = dashboard_json()
    found = variables(dashboard)
    assert set(found) == {"instance", "route"}
    source = dashboard["panels"][0]["datasource"]
    for name, variable in found.items():
        assert variable["type"] == "query" and variable["datasource"] == source, name
        assert variable["query"].startswith("label_values(") and variable["query"].endswith(
            f", {name})"
        )
        assert variable["includeAll"] and variable["multi"] and variable["allValue"], name
    # "All" routes: the question routes, so that no scrape of /metrics counts in a percentile.
    assert re.fullmatch(found["route"]["allValue"], "/v1/chat/completions")
    assert not re.fullmatch(found["route"]["allValue"], "/metrics")


def test_every_query_of_ragtimes_metrics_is_narrowed_by_the_variables() -> None:
    """Each selector of one of ragtime's metrics takes the instances chosen, and, where the
    metric has a route, the routes chosen: a panel that ignored them would say something of
    the whole service under a title that says one route."""
    labels = label_names()
    unnarrowed = []
    for query in panel_queries(dashboard_json()):
        for name, braces in SELECTOR.findall(query.expr):
            metric = SERIES_SUFFIX.sub("", name)
            assert metric in labels, f"{query.panel}: {name} is not one of ragtime's metrics"
            wanted = ['instance=~"$instance"']
            if "route" in labels[metric]:
                wanted.append('route=~"$route"')
            if not all(w in braces for w in wanted):
                unnarrowed.append(f"{query.panel} / {query.ref_id}: {name}{braces}")
    assert not unnarrowed, unnarrowed


def test_the_panels_include_what_the_issue_asks_for() -> None:
    """End-to-end percentiles against the budget, stage p95 from buckets, budget and stage
    violations, outcomes, degradations, refusals, the engine's queue and KV."""
    exprs = " ".join(query.expr for query in panel_queries(dashboard_json()))
    for wanted in (
        "histogram_quantile(0.99, sum by (le) (rate(ragtime_request_duration_seconds_bucket",
        "ragtime_request_budget_seconds_bucket",
        "histogram_quantile(0.95, sum by (stage, le) (rate(ragtime_stage_duration_seconds_bucket",
        "ragtime_budget_exceeded_total",
        "ragtime_stage_budget_exceeded_total",
        "ragtime_request_outcomes_total",
        "ragtime_degradations_total",
        "ragtime_admission_refused_total",
        "sglang:num_queue_reqs",
        "sglang:token_usage",
    ):
        assert wanted in exprs, wanted
