"""deploy/grafana/: ragtime's Grafana dashboard and its provisioning, in Grafana's shape, and every
panel's queries answered with data by a real Prometheus scraping a real ragtime.

No Grafana runs here: Grafana is in none of the registries this project reaches (PyPI, npm and
Debian's packages), so its shape is checked without it. The dashboard is read with Grafana's own
types, generated from its schemas (``grafana-foundation-sdk``, its build for Grafana 11.6, the
release docker-compose.yml runs): a round trip through them must change nothing, and they drop
whatever the schema does not have. The two provisioning files are read as Grafana's provisioning
code reads them, and the facts a Grafana user would trip over are checked: unique panel ids, every
panel on the provisioned Prometheus by uid, every query with an ``expr`` and a ``refId``, panels
within the 24 columns of the grid, the provider's path where compose mounts the JSON.

The data: Debian's Prometheus scrapes ragtime (a process, answering through the simulated SGLang
server) and that engine under a little load, with deploy/prometheus/alerts.yml loaded; each query
of each panel must return points a panel can draw.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from grafana_foundation_sdk.cog import runtime as cogruntime
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import prometheus as prometheus_query
from grafana_foundation_sdk.models.dashboard import Dashboard, Panel

from tests.helpers.compose_file import ROOT, bind_mounts_with_modes, compose_services, environment
from tests.helpers.grafana_dashboard import (
    DASHBOARD_FILE,
    DASHBOARDS,
    GRAFANA,
    PanelQuery,
    dashboard_json,
    fill,
    metric_names,
    panel_queries,
    variables,
)
from tests.helpers.prometheus_server import (
    PrometheusServer,
    deploy_config,
    deploy_rules,
    finite_points,
    prometheus_path,
    prometheus_serving,
)
from tests.helpers.ragtime_under_load import ragtime_under_load

DATASOURCES_FILE = GRAFANA / "provisioning" / "datasources" / "prometheus.yml"
PROVIDERS_FILE = GRAFANA / "provisioning" / "dashboards" / "ragtime.yml"
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"

#: The keys Grafana reads from a data source of a provisioning file at ``apiVersion: 1``: the
#: yaml tags of ``upsertDataSourceFromConfigV1`` in grafana/grafana's
#: pkg/services/provisioning/datasources/types.go (the file is ``apiVersion`` and ``datasources``,
#: ``deleteDatasources``; config_reader.go reads every .yaml or .yml of the folder).
DATASOURCE_KEYS = frozenset(
    {
        "orgId", "orgName", "version", "name", "type", "access", "url", "user", "database",
        "basicAuth", "basicAuthUser", "withCredentials", "isDefault", "correlations",
        "jsonData", "secureJsonData", "editable", "uid",
    }
)  # fmt: skip
#: The keys of a dashboard provider at ``apiVersion: 1``: the yaml tags of ``configs`` in
#: pkg/services/provisioning/dashboards/types.go (the file is ``apiVersion`` and ``providers``);
#: file_reader.go takes ``options.path`` and loads every .json under it.
PROVIDER_KEYS = frozenset(
    {
        "name", "type", "orgId", "folder", "folderUid", "editable", "options",
        "disableDeletion", "updateIntervalSeconds", "allowUiUpdates",
    }
)  # fmt: skip
GRID_COLUMNS = 24
#: How far back each range query looks, as a panel over the last minute would.
LOOKBACK_S = 60.0


def load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    assert isinstance(data, dict), path
    return data


def provisioned_datasource() -> dict[str, Any]:
    (source,) = load_yaml(DATASOURCES_FILE)["datasources"]
    assert isinstance(source, dict)
    return source


# The shape Grafana reads.


def test_the_dashboard_survives_grafanas_own_types() -> None:
    """Read with each panel plugin's options and each query's Prometheus fields known (the
    SDK's registry of plugins), written back: nothing dropped, nothing changed."""
    register_default_plugins()
    raw = dashboard_json()
    written_back = json.loads(json.dumps(Dashboard.from_json(raw), cls=JSONEncoder))
    assert written_back == raw
    for panel in Dashboard.from_json(raw).panels or []:
        assert isinstance(panel, Panel), "no rows: every panel shows data"
        assert cogruntime.panelcfg_config(panel.type_val) is not None, panel.type_val
        for query in panel.targets or []:
            assert isinstance(query, prometheus_query.Dataquery), (panel.title, query)


def test_the_round_trip_catches_what_the_schema_lacks() -> None:
    """The check above can fail: a key Grafana's schema does not have is dropped."""
    register_default_plugins()
    raw = dashboard_json()
    raw["panels"][0]["targets"][0]["exprr"] = "up"
    raw["panels"][1]["gridPosition"] = {"x": 0}
    written_back = json.loads(json.dumps(Dashboard.from_json(raw), cls=JSONEncoder))
    assert "exprr" not in written_back["panels"][0]["targets"][0]
    assert "gridPosition" not in written_back["panels"][1] and written_back != raw


def test_the_data_source_is_provisioned_as_grafana_reads_it() -> None:
    provisioning = load_yaml(DATASOURCES_FILE)
    assert provisioning["apiVersion"] == 1  # 0 or absent: the deprecated format
    assert set(provisioning) == {"apiVersion", "datasources"}
    source = provisioned_datasource()
    assert set(source) <= DATASOURCE_KEYS, set(source) - DATASOURCE_KEYS
    assert source["type"] == "prometheus" and source["access"] == "proxy"
    assert source["uid"] and source["name"] and source["isDefault"] is True
    # $__rate_interval is at least 4 scrapes of this interval: Prometheus's own, in step.
    scrape = load_yaml(PROMETHEUS_DIR / "prometheus.yml")["global"]["scrape_interval"]
    assert source["jsonData"]["timeInterval"] == scrape


def test_the_dashboards_are_provided_from_where_compose_mounts_them() -> None:
    provisioning = load_yaml(PROVIDERS_FILE)
    assert provisioning["apiVersion"] == 1
    assert set(provisioning) == {"apiVersion", "providers"}
    (provider,) = provisioning["providers"]
    assert set(provider) <= PROVIDER_KEYS, set(provider) - PROVIDER_KEYS
    assert provider["name"] and provider["type"] == "file"
    path = provider["options"]["path"]
    grafana = compose_services()["grafana"]
    mounts = {target: ROOT / source for source, target, _ in bind_mounts_with_modes(grafana)}
    assert mounts[path].resolve() == DASHBOARDS, f"{path} is not where the dashboards are"
    assert sorted(p.name for p in DASHBOARDS.iterdir()) == ["ragtime.json"]  # .json: read
    home = environment(grafana)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{path}/{DASHBOARD_FILE.name}"


def test_every_panel_queries_the_provisioned_prometheus() -> None:
    dashboard = dashboard_json()
    assert dashboard["uid"] and dashboard["title"]  # Grafana refuses a dashboard without title
    source = provisioned_datasource()
    expected = {"type": "prometheus", "uid": source["uid"]}
    panels = dashboard["panels"]
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {ids}"
    for panel in panels:
        assert panel["title"] and panel["datasource"] == expected, panel["title"]
        ref_ids = [target["refId"] for target in panel["targets"]]
        assert ref_ids and len(ref_ids) == len(set(ref_ids)), (panel["title"], ref_ids)
        for target in panel["targets"]:
            assert target["expr"].strip(), (panel["title"], target)
            assert target.get("datasource", expected) == expected, (panel["title"], target)


def test_the_panels_fit_the_grid_without_overlapping() -> None:
    taken: dict[tuple[int, int], str] = {}
    for panel in dashboard_json()["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["y"] >= 0 and pos["w"] >= 1 and pos["h"] >= 1, panel["title"]
        assert pos["x"] + pos["w"] <= GRID_COLUMNS, f"{panel['title']} is wider than the grid"
        for column in range(pos["x"], pos["x"] + pos["w"]):
            for row in range(pos["y"], pos["y"] + pos["h"]):
                other = taken.setdefault((column, row), panel["title"])
                assert other == panel["title"], f"{panel['title']} overlaps {other}"


# The data a real Prometheus gives each query.


@pytest.fixture(scope="module")
def scraping(
    tmp_path_factory: pytest.TempPathFactory, seeded_data_dir: Path, api_key: str
) -> Iterator[PrometheusServer]:
    if prometheus_path() is None:
        message = "prometheus is not installed (Debian: `make alert-tools` installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    workdir = tmp_path_factory.mktemp("grafana")
    with (
        ragtime_under_load(seeded_data_dir, api_key, workdir) as loaded,
        prometheus_serving(
            workdir / "prometheus",
            deploy_config({"ragtime": loaded.url, "sglang": loaded.engine_url}),
            {"alerts.yml": deploy_rules("0s")},
        ) as prometheus,
    ):
        yield prometheus
        assert not loaded.errors, loaded.errors[:3]


def queries_without_data(prometheus: PrometheusServer, queries: list[PanelQuery]) -> list[str]:
    """The queries whose range query returns no point a panel could draw."""
    return [
        f"{query.panel} / {query.ref_id}: {query.concrete}"
        for query in queries
        if not finite_points(prometheus.query_range(query.concrete, since_s=LOOKBACK_S))
    ]


def wait_for_data(prometheus: PrometheusServer, queries: list[PanelQuery]) -> list[str]:
    """Until every query has data, or 60 s have passed: the queries still without any."""
    deadline = time.monotonic() + 60
    missing = queries_without_data(prometheus, queries)
    while missing and time.monotonic() < deadline:
        time.sleep(1)
        missing = queries_without_data(prometheus, queries)
    return missing


@pytest.mark.process
def test_every_panel_query_returns_data(scraping: PrometheusServer) -> None:
    queries = panel_queries(dashboard_json())
    missing = wait_for_data(scraping, queries)
    assert not missing, (
        f"no data for {missing}; targets up: {scraping.targets_up()}\n{scraping.log_tail()}"
    )
    # What fires is deploy/prometheus/alerts.yml's, on conditions that really held.
    firing = scraping.api("query", query='ALERTS{alertstate="firing"}')["result"]
    rules = load_yaml(PROMETHEUS_DIR / "alerts.yml")["groups"]
    names = {rule["alert"] for group in rules for rule in group["rules"]}
    assert firing and {alert["metric"]["alertname"] for alert in firing} <= names, firing


@pytest.mark.process
def test_a_query_of_a_metric_that_does_not_exist_has_no_data(scraping: PrometheusServer) -> None:
    """The check above can fail: a panel naming a metric ragtime does not export stays empty."""
    queries = panel_queries(dashboard_json())
    assert not wait_for_data(scraping, queries[:1])  # the first query has data ...
    misspelt = [misspell(query, "ragtime_ttft_", "ragtime_tfft_") for query in queries]
    misspelt = [query for query in misspelt if "ragtime_tfft_" in query.expr]
    assert misspelt, "the dashboard has a TTFT panel"
    assert len(queries_without_data(scraping, misspelt)) == len(misspelt)  # ... not misspelt


def misspell(query: PanelQuery, right: str, wrong: str) -> PanelQuery:
    expr = query.expr.replace(right, wrong)
    return PanelQuery(query.panel, query.ref_id, expr, fill(expr, dashboard_json()))


def exported(prometheus: PrometheusServer) -> set[str]:
    """Every metric the real Prometheus has scraped: ragtime's, its engine's, its own."""
    return set(prometheus.api("label/__name__/values"))


def unexported(names: set[str], queries: list[PanelQuery]) -> list[str]:
    """The metrics the queries name that are not among ``names``: a panel that would stay
    empty, or draw ``or vector(0)`` in place of what it claims to show."""
    return sorted({name for q in queries for name in metric_names(q.concrete)} - names)


@pytest.mark.process
def test_every_metric_a_panel_names_is_exported(scraping: PrometheusServer) -> None:
    queries = panel_queries(dashboard_json())
    assert not wait_for_data(scraping, queries)
    names = exported(scraping)
    assert not unexported(names, queries)
    # A panel's variables list what ragtime exports: its instances, its question routes.
    for name, variable in variables(dashboard_json()).items():
        selector, label = label_values(fill(variable["query"], dashboard_json()))
        assert not unexported(names, [PanelQuery(name, "", selector, selector)])
        values = scraping.api(f"label/{label}/values", **{"match[]": selector})
        assert values, f"variable {name} lists nothing"
        assert all(re.fullmatch(variable["allValue"], value) for value in values), values
    routes = scraping.api("label/route/values", **{"match[]": "ragtime_request_outcomes_total"})
    assert set(routes) == {"/v1/ask", "/v1/chat/completions", "/v1/search"}


@pytest.mark.process
def test_a_misspelt_metric_is_caught_where_its_query_still_has_data(
    scraping: PrometheusServer,
) -> None:
    """The check above can fail, where the check of data cannot: a misspelt metric under
    ``or vector(0)`` still draws a line (a 0 that means nothing)."""
    queries = panel_queries(dashboard_json())
    assert not wait_for_data(scraping, queries)
    errors = next(q for q in queries if "or vector(0)" in q.expr)
    misspelt = misspell(errors, "ragtime_admission_refused_total", "ragtime_admission_refusd_total")
    assert not queries_without_data(scraping, [misspelt])  # data: the misspelling is hidden ...
    assert unexported(exported(scraping), [misspelt]) == ["ragtime_admission_refusd_total"]


def label_values(query: str) -> tuple[str, str]:
    """The selector and label of a variable's ``label_values(selector, label)``."""
    found = re.fullmatch(r"label_values\((.+), *(\w+)\)", query.strip())
    assert found, f"not label_values(selector, label): {query}"
    return found.group(1), found.group(2)
