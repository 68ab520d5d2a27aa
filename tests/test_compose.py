"""docker-compose.yml agrees with the code and the configs it mounts.

No Docker engine runs here: the stack is checked by parsing. Every file it bind-mounts exists,
every ``${VAR}`` it uses is documented in ``.env.example``, every ``RAGTIME_*`` key it or
``.env.example`` sets is a real setting (and their values validate), and every port and URL
(the API's, SGLang's, Jaeger's OTLP receivers, Prometheus's targets, Alertmanager's) agrees
from one end to the other.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from app.frontdoor.shutdown import EXIT_AFTER_GRACE_S
from app.settings import Settings
from bench.sglang_sim.server import UPSTREAM_VERSION

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
PROMETHEUS_FILE = ROOT / "deploy" / "prometheus" / "prometheus.yml"

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


# Helpers over compose's short and long syntaxes.


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.partition("=")[::2] for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def container_ports(service: dict[str, Any]) -> set[int]:
    """The container side of ``ports`` and ``expose``."""
    ports: set[int] = set()
    for entry in [*(service.get("ports") or []), *(service.get("expose") or [])]:
        if isinstance(entry, dict):
            ports.add(int(entry["target"]))
        else:
            ports.add(int(str(entry).split("/")[0].rsplit(":", 1)[-1]))
    return ports


def bind_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """``(host source, container target)`` of each bind mount (named volumes left out)."""
    mounts = []
    for entry in service.get("volumes") or []:
        if isinstance(entry, dict):
            if entry.get("type") == "bind":
                mounts.append((entry["source"], entry["target"]))
            continue
        source, _, rest = str(entry).partition(":")
        target = rest.split(":")[0]
        if source.startswith((".", "/", "~", "$")):
            mounts.append((source, target))
    return mounts


def command(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command") or []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(part) for part in cmd]


def flag_value(args: list[str], flag: str) -> str:
    for i, arg in enumerate(args):
        if arg == flag:
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    raise AssertionError(f"{flag} not in {args}")


def host_port(address: str) -> tuple[str, int]:
    parts = urlsplit(address if "//" in address else f"//{address}")
    assert parts.hostname and parts.port, f"no host:port in {address!r}"
    return parts.hostname, parts.port


def healthcheck_text(service: dict[str, Any]) -> str:
    test = service["healthcheck"]["test"]
    return test if isinstance(test, str) else " ".join(test)


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
    assert {"api", "sglang", "jaeger", "prometheus", "alertmanager"} <= set(services)


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
