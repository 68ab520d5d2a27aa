"""docker-compose.yml agrees with the code and the configs it mounts.

No Docker engine runs here: the stack is checked by parsing. Every file it bind-mounts exists,
every ``${VAR}`` it uses is documented in ``.env.example``, every ``RAGTIME_*`` key it or
``.env.example`` sets is a real setting (and their values validate), and every port and URL
(the API's, SGLang's, Jaeger's OTLP receivers, Prometheus's targets, Alertmanager's, Grafana's
data source) agrees from one end to the other. The helpers over compose's syntaxes are in
``tests/helpers/compose_file.py``; ``tests/test_grafana.py`` checks Grafana's provisioning.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.frontdoor.shutdown import EXIT_AFTER_GRACE_S
from app.settings import Settings
from bench.sglang_sim.server import UPSTREAM_VERSION
from tests.helpers.compose_file import (
    COMPOSE_FILE,
    ROOT,
    bind_mounts,
    bind_mounts_with_modes,
    command,
    container_ports,
    environment,
    flag_value,
    healthcheck_text,
    host_port,
)

ENV_EXAMPLE = ROOT / ".env.example"
PROMETHEUS_FILE = ROOT / "deploy" / "prometheus" / "prometheus.yml"
GRAFANA_PROVISIONING = ROOT / "deploy" / "grafana" / "provisioning"

#: Jaeger's well-known OTLP receiver ports.
OTLP_GRPC_PORT = 4317
OTLP_HTTP_PORT = 4318

#: ``${VAR}``, ``${VAR:-default}``, ``${VAR:?message}``; ``$${...}`` is an escaped dollar.
VARIABLE = re.compile(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)")

SGLANG_FLAGS = (
    "--model-path",
    "--host",
    "--port",
    "--enable-metrics",
    "--enable-cache-report",
    "--enable-priority-scheduling",
    "--enable-trace",
    "--otlp-traces-endpoint",
)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and "services" in data
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


@pytest.fixture(scope="module")
def env_example() -> dict[str, str]:
    values: dict[str, str] = {}
    for number, line in enumerate(ENV_EXAMPLE.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        assert sep, f".env.example line {number} is not KEY=value: {line!r}"
        values[key.strip()] = value.strip()
    return values


@pytest.fixture(scope="module")
def prometheus() -> dict[str, Any]:
    data = yaml.safe_load(PROMETHEUS_FILE.read_text())
    assert isinstance(data, dict)
    return data


def sglang_port(services: dict[str, dict[str, Any]]) -> int:
    return int(flag_value(command(services["sglang"]), "--port"))


def setting_name(key: str) -> str:
    prefix = str(Settings.model_config.get("env_prefix", ""))
    assert key.startswith(prefix)
    return key[len(prefix) :].lower()


# The files and variables it needs.


def test_every_image_is_pinned(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        image = service.get("image")
        if image is None:
            assert "build" in service, f"{name} has neither an image nor a build"
            continue
        tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
        assert tag and tag != "latest", f"{name}: {image} is not pinned"


def test_the_stack_has_its_services(services: dict[str, dict[str, Any]]) -> None:
    assert {"api", "sglang", "jaeger", "prometheus", "alertmanager", "grafana"} <= set(services)


def test_every_bind_mounted_repo_path_exists(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    named = set(compose.get("volumes") or {})
    for name, service in services.items():
        for source, _ in bind_mounts(service):
            if source.startswith(("~", "$", "/")):
                continue  # the user's home (HF cache) or an absolute path: not in the repo
            assert (ROOT / source).exists(), f"{name} mounts {source}, missing from the repo"
        for entry in service.get("volumes") or []:
            volume = entry.get("source") if isinstance(entry, dict) else str(entry).split(":")[0]
            if volume and not volume.startswith((".", "/", "~", "$")):
                assert volume in named, f"{name} uses volume {volume!r}, not declared"


def test_every_variable_is_documented_in_env_example(env_example: dict[str, str]) -> None:
    used = set(VARIABLE.findall(COMPOSE_FILE.read_text()))
    assert used, "the model should come from .env"
    missing = used - set(env_example)
    assert not missing, f"docker-compose.yml uses {sorted(missing)}, not in .env.example"


def test_env_example_documents_each_key() -> None:
    lines = ENV_EXAMPLE.read_text().splitlines()
    for i, line in enumerate(lines):
        if line.strip() and not line.startswith("#"):
            assert i > 0 and lines[i - 1].startswith("#"), f"no comment above {line!r}"


def test_api_reads_env_file(services: dict[str, dict[str, Any]]) -> None:
    env_file = services["api"]["env_file"]
    files = [env_file] if isinstance(env_file, str | dict) else env_file
    paths = [f["path"] if isinstance(f, dict) else f for f in files]
    assert ".env" in paths


# Settings: names and values.


def test_every_ragtime_key_is_a_setting(
    services: dict[str, dict[str, Any]], env_example: dict[str, str]
) -> None:
    prefix = str(Settings.model_config.get("env_prefix", ""))
    assert prefix == "RAGTIME_"
    keys = {
        (f"{name} environment", key)
        for name, service in services.items()
        for key in environment(service)
        if key.startswith(prefix)
    } | {(".env.example", key) for key in env_example if key.startswith(prefix)}
    for where, key in sorted(keys):
        assert setting_name(key) in Settings.model_fields, f"{where}: {key} is no setting"


def test_the_api_settings_validate(
    services: dict[str, dict[str, Any]],
    env_example: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API's environment in the stack (.env.example, then compose's overrides) is valid."""
    for key in list(os.environ):
        if key.startswith("RAGTIME_"):
            monkeypatch.delenv(key)
    env = {**env_example, **environment(services["api"])}
    for key, value in env.items():
        if key.startswith("RAGTIME_"):
            monkeypatch.setenv(key, value)
    settings = Settings(_env_file=None)
    assert settings.generation_backend == "sglang"
    assert settings.host == "0.0.0.0"
    assert settings.served_model == env_example["RAGTIME_SERVED_MODEL"]
    assert settings.served_tokenizer == env_example["RAGTIME_SERVED_TOKENIZER"]
    endpoints = [str(e) for e in settings.sglang_endpoints]
    assert endpoints and all(host_port(e)[0] == "sglang" for e in endpoints)


# Ports and URLs.


def test_api_port_matches_the_settings(services: dict[str, dict[str, Any]]) -> None:
    port = Settings.model_fields["port"].default
    api = services["api"]
    assert port in container_ports(api)
    assert f"127.0.0.1:{port}/healthz" in healthcheck_text(api)
    assert api.get("build") in (".", {"context": "."})
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"RAGTIME_PORT={port}" in dockerfile, "the image must serve on the settings' port"


def test_the_image_ships_the_service_only() -> None:
    """The image copies the build context, less what ``.dockerignore`` keeps out of it."""
    copies = [
        line.split()[1:]
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.startswith(("COPY", "ADD"))
    ]
    assert copies == [[".", "."]], "a new COPY must keep the harness and the tests out too"
    ignored = {
        line.strip().strip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {"bench", "benchmarks", "tests"} <= ignored


def test_api_reaches_sglang_on_its_port(services: dict[str, dict[str, Any]]) -> None:
    port = sglang_port(services)
    endpoints = json.loads(environment(services["api"])["RAGTIME_SGLANG_ENDPOINTS"])
    assert endpoints == [f"http://sglang:{port}"]
    assert port in container_ports(services["sglang"])
    assert f":{port}/health" in healthcheck_text(services["sglang"])
    depends = services["api"]["depends_on"]
    assert depends["sglang"]["condition"] == "service_healthy"
    assert "jaeger" in depends


def test_traces_go_to_jaegers_otlp_receivers(services: dict[str, dict[str, Any]]) -> None:
    jaeger = services["jaeger"]
    assert str(jaeger["image"]).startswith("jaegertracing/jaeger:2.")
    assert {16686, OTLP_GRPC_PORT, OTLP_HTTP_PORT} <= container_ports(jaeger)
    api_endpoint = environment(services["api"])["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert api_endpoint.startswith("http://")
    assert host_port(api_endpoint) == ("jaeger", OTLP_HTTP_PORT)  # the API exports OTLP/HTTP
    sglang_endpoint = flag_value(command(services["sglang"]), "--otlp-traces-endpoint")
    assert host_port(sglang_endpoint) == ("jaeger", OTLP_GRPC_PORT)  # SGLang exports OTLP/gRPC


def test_the_pages_trace_links_reach_jaegers_published_ui(
    services: dict[str, dict[str, Any]],
) -> None:
    """The browser follows the page's links, from the host: Jaeger's UI on its published port."""
    link = environment(services["api"])["RAGTIME_JAEGER_URL"]
    assert host_port(link) == ("localhost", 16686)
    assert "16686:16686" in services["jaeger"]["ports"]


def test_prometheus_targets_are_compose_services(
    services: dict[str, dict[str, Any]], prometheus: dict[str, Any]
) -> None:
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    for name, job in jobs.items():
        for static in job["static_configs"]:
            for target in static["targets"]:
                host, port = host_port(target)
                assert host in services, f"job {name} scrapes {target}: no service {host}"
                assert port in container_ports(services[host]), f"{target}: {host} has no {port}"
    expected = {"api": Settings.model_fields["port"].default, "sglang": sglang_port(services)}
    scraped = {
        host_port(target)
        for job in jobs.values()
        if job.get("metrics_path", "/metrics") == "/metrics"
        for static in job["static_configs"]
        for target in static["targets"]
    }
    for host, port in expected.items():
        assert (host, port) in scraped, f"Prometheus does not scrape {host}:{port}/metrics"


def test_prometheus_sends_alerts_to_the_alertmanager_service(
    services: dict[str, dict[str, Any]], prometheus: dict[str, Any]
) -> None:
    targets = [
        target
        for manager in prometheus["alerting"]["alertmanagers"]
        for static in manager["static_configs"]
        for target in static["targets"]
    ]
    assert targets
    for target in targets:
        host, port = host_port(target)
        assert host == "alertmanager" and port in container_ports(services["alertmanager"])


# What each service mounts and runs.


def test_prometheus_loads_the_mounted_config_and_rules(
    services: dict[str, dict[str, Any]], prometheus: dict[str, Any]
) -> None:
    service = services["prometheus"]
    args = command(service)
    assert "--enable-feature=exemplar-storage" in args
    mounts = {target: source for source, target in bind_mounts(service)}
    config = flag_value(args, "--config.file")
    assert Path(ROOT / mounts[config]).resolve() == PROMETHEUS_FILE
    for rule_file in prometheus["rule_files"]:
        target = str(Path(config).parent / rule_file)
        assert target in mounts, f"rule file {rule_file} is not mounted at {target}"
        assert (ROOT / mounts[target]).resolve() == (PROMETHEUS_FILE.parent / rule_file).resolve()


def test_alertmanager_mounts_its_config(services: dict[str, dict[str, Any]]) -> None:
    mounts = {target: source for source, target in bind_mounts(services["alertmanager"])}
    source = mounts["/etc/alertmanager/alertmanager.yml"]  # the image's default --config.file
    assert (ROOT / source).resolve() == ROOT / "deploy" / "alertmanager" / "alertmanager.yml"


def test_grafana_reads_its_provisioning_and_the_prometheus_service(
    services: dict[str, dict[str, Any]],
) -> None:
    """Grafana, pinned to one release, reads its provisioning (and dashboards) from the repo,
    read-only, and its data source is the prometheus service at the port that serves."""
    grafana = services["grafana"]
    assert re.fullmatch(r"grafana/grafana:\d+\.\d+\.\d+", grafana["image"]), grafana["image"]
    mounts = {target: (source, ro) for source, target, ro in bind_mounts_with_modes(grafana)}
    source, _ = mounts["/etc/grafana/provisioning"]  # the image's GF_PATHS_PROVISIONING
    assert (ROOT / source).resolve() == GRAFANA_PROVISIONING
    assert all(ro for _, ro in mounts.values()), f"Grafana writes to its volume only: {mounts}"
    assert "prometheus" in grafana["depends_on"] and 3000 in container_ports(grafana)
    provisioned = yaml.safe_load((GRAFANA_PROVISIONING / "datasources/prometheus.yml").read_text())
    (source_config,) = provisioned["datasources"]
    host, port = host_port(source_config["url"])
    assert host == "prometheus" and port in container_ports(services["prometheus"])


def test_sglang_runs_on_a_gpu_with_metrics_and_traces(
    services: dict[str, dict[str, Any]],
) -> None:
    sglang = services["sglang"]
    assert sglang["image"] == f"lmsysorg/sglang:v{UPSTREAM_VERSION}"  # what the sim follows
    args = command(sglang)
    assert args[:3] == ["python3", "-m", "sglang.launch_server"]
    for flag in SGLANG_FLAGS:
        assert flag in args, f"sglang is launched without {flag}"
    assert flag_value(args, "--model-path").startswith("${RAGTIME_SERVED_MODEL")
    assert flag_value(args, "--host") == "0.0.0.0"
    devices = sglang["deploy"]["resources"]["reservations"]["devices"]
    assert any(d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) for d in devices)
    assert sglang["ipc"] == "host"
    assert "/health" in healthcheck_text(sglang)
    assert sglang["healthcheck"].get("start_period"), "the model load needs a start period"
    hf_cache = [t for _, t in bind_mounts(sglang) if t == "/root/.cache/huggingface"]
    assert hf_cache, "sglang should keep downloaded models in the HF cache volume"
    assert "HF_TOKEN" in environment(sglang) or "env_file" in sglang


def test_a_stop_lets_the_api_drain(services: dict[str, dict[str, Any]]) -> None:
    """``docker compose stop`` sends SIGTERM, then SIGKILL after the stop grace period (10 s
    unless set): it must cover ragtime's shutdown grace and the exit after it, and an init as
    process 1 passes the signal on to the server the image's command execs (issue 41 §1)."""
    api = services["api"]
    grace_s = float(
        environment(api).get("RAGTIME_SHUTDOWN_GRACE_S")
        or Settings.model_fields["shutdown_grace_s"].default
    )
    period = str(api["stop_grace_period"])
    assert period.endswith("s"), period
    assert float(period[:-1]) >= grace_s + EXIT_AFTER_GRACE_S, (period, grace_s)
    assert api.get("init") is True
    assert "exec ragtime serve" in (ROOT / "Dockerfile").read_text()
