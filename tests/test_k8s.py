"""deploy/k8s renders, validates against the Kubernetes schemas, and agrees with the code.

No cluster runs here. The manifests are rendered twice: by ``kubectl kustomize`` (Debian's
kubectl, which ``make test`` installs where missing; the test skips with a message when it is
absent) and by ``render_locally`` (the kustomization uses only ``resources`` and ``namespace``,
so the equivalent is a few lines), and the two must agree. Every built-in kind is validated with
``kubernetes-validate`` (its schemas ship inside the wheel: no network, which the test suite's
network guard enforces). KEDA's ScaledObject is a CRD outside those schemas: it is checked
structurally here. Then, as tests/test_compose.py does for compose: every ``RAGTIME_*`` key is
a real setting (and the API's settings validate), ports, probe paths and Service selectors line
up, shutdown timing matches ``RAGTIME_SHUTDOWN_GRACE_S``, each pool's endpoint is its gateway,
each gateway selects its pool's workers with flags SGLang's launcher defines, and every metric
an autoscaler reads is exported by ragtime or by SGLang.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate  # type: ignore[import-untyped]  # no py.typed marker
import pytest
import yaml
from sglang_router.launch_router import parse_router_args

from app.frontdoor.shutdown import EXIT_AFTER_GRACE_S
from app.main import API_ROUTES, QUESTION_ROUTES
from app.settings import Settings
from bench.sglang_sim.server import UPSTREAM_VERSION
from tracing.metrics import REGISTRY

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = kubernetes_validate.latest_version()

#: Kinds without a schema in kubernetes-validate (CRDs), each checked structurally below.
CRD_KINDS = {("keda.sh/v1alpha1", "ScaledObject")}

#: Settings the manifests name (commented out) that arrive with other branches: the `tenants`
#: helper's PostgreSQL key store, key secret and Redis rate limits (issue 13), the `snapshots`
#: helper's index kinds and snapshot polling (issue 12). When one becomes a field of Settings,
#: test_pending_settings_are_not_settings_yet fails: drop it from here and uncomment it in
#: deploy/k8s/config.yaml.
PENDING_SETTINGS: set[str] = set()

#: SGLang's scheduler gauges, as python/sglang/srt/metrics/collector.py (sgl-project/sglang,
#: SchedulerMetricsCollector) names them; bench/sglang_sim/server.py exports the same.
SGLANG_METRICS = {
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
    "sglang:cache_hit_rate",
    "sglang:gen_throughput",
}

#: The gateway's probe routes (sgl-model-gateway/src/server.rs: public_routes).
GATEWAY_ROUTES = {"/liveness", "/readiness", "/health"}

#: What ragtime's shutdown spends after the grace at most: connections close and queued spans
#: flush within it (a watchdog ends the process there, ``app.frontdoor.server``).
AFTER_GRACE_S = EXIT_AFTER_GRACE_S

METRIC_NAME = re.compile(r"\b(ragtime_[a-z0-9_]+|sglang:[a-z0-9_]+)")
SETTING_KEY = re.compile(r"\bRAGTIME_[A-Z0-9_]+")


# Rendering.


def kustomization() -> dict[str, Any]:
    data = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert isinstance(data, dict)
    return data


def render_locally() -> list[dict[str, Any]]:
    """What ``kubectl kustomize`` makes of this kustomization: its resources, in its namespace.

    Only ``resources``, ``namespace`` (on every object but the Namespace, and on RoleBinding
    subjects that are ServiceAccounts, as kustomize does) and ``images`` (what ``kustomize edit
    set image`` writes) are honoured; a kustomization that uses more must fail here rather than
    render differently.
    """
    spec = kustomization()
    unsupported = set(spec) - {"namespace", "resources", "images", "apiVersion", "kind"}
    assert not unsupported, f"render_locally does not implement {sorted(unsupported)}"
    docs: list[dict[str, Any]] = []
    for name in spec["resources"]:
        for doc in yaml.safe_load_all((K8S / name).read_text()):
            if doc:
                if doc["kind"] != "Namespace" and "namespace" in spec:
                    doc["metadata"]["namespace"] = spec["namespace"]
                    for subject in doc.get("subjects", []):
                        if subject["kind"] == "ServiceAccount":
                            subject["namespace"] = spec["namespace"]
                if doc["kind"] in ("Deployment", "Job"):
                    for main in doc["spec"]["template"]["spec"]["containers"]:
                        main["image"] = new_image(main["image"], spec.get("images", []))
                docs.append(doc)
    return docs


def new_image(image: str, images: list[dict[str, str]]) -> str:
    """``image`` as a kustomization's ``images`` entries rename and retag it."""
    name, _, tag = image.partition(":")
    for entry in images:
        if entry["name"] == name:
            return f"{entry.get('newName', name)}:{entry.get('newTag', tag)}"
    return image


def render_with_kubectl() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed: `make test` installs Debian's kubernetes-client")
    result = subprocess.run(
        [kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"kubectl kustomize failed: {result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def key(doc: dict[str, Any]) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return render_locally()


@pytest.fixture(scope="module")
def by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    kinds: dict[str, dict[str, dict[str, Any]]] = {}
    for doc in docs:
        kinds.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc
    return kinds


@pytest.fixture(scope="module")
def config(by_kind: dict[str, dict[str, dict[str, Any]]]) -> dict[str, str]:
    data = by_kind["ConfigMap"]["ragtime-config"]["data"]
    assert all(isinstance(v, str) for v in data.values()), "ConfigMap values must be strings"
    return dict(data)


@pytest.fixture(scope="module")
def settings(config: dict[str, str]) -> Iterator[Settings]:
    """The API's settings as the ConfigMap gives them (nothing from this process's env)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("RAGTIME_"):
                patch.delenv(name)
        for name, value in config.items():
            if name.startswith("RAGTIME_"):
                patch.setenv(name, value)
        yield Settings(_env_file=None)


# Helpers over the rendered objects.


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec


def container(workload: dict[str, Any]) -> dict[str, Any]:
    containers = pod_spec(workload)["containers"]
    assert len(containers) == 1
    only: dict[str, Any] = containers[0]
    return only


def command(workload: dict[str, Any]) -> list[str]:
    main = container(workload)
    return [str(a) for a in [*main.get("command", []), *main.get("args", [])]]


def flag_values(args: list[str], flag: str) -> list[str]:
    """The values after ``flag``, up to the next flag."""
    if flag not in args:
        raise AssertionError(f"{flag} not in {args}")
    values = []
    for arg in args[args.index(flag) + 1 :]:
        if arg.startswith("--"):
            break
        values.append(arg)
    return values


def named_port(workload: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    ports = {p["name"]: p["containerPort"] for p in container(workload)["ports"]}
    return int(ports[port])


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def pod_labels(workload: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = workload["spec"]["template"]["metadata"]["labels"]
    return labels


def mounts(workload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["mountPath"]: m for m in container(workload).get("volumeMounts", [])}


def volume(workload: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(v for v in pod_spec(workload)["volumes"] if v["name"] == name)
    return found


def exported_metric_names() -> set[str]:
    """Every sample name ragtime's registry exposes (histograms' _bucket/_sum/_count too)."""
    names = set()
    for family in REGISTRY.collect():
        names.add(family.name)
        kind = family.type
        if kind == "counter":
            names.add(family.name + "_total")
        if kind == "histogram":
            names |= {family.name + s for s in ("_bucket", "_sum", "_count")}
    return names


# Rendering and schemas.


@pytest.mark.process
def test_kubectl_renders_what_render_locally_does(docs: list[dict[str, Any]]) -> None:
    rendered = render_with_kubectl()
    assert sorted(map(key, rendered)) == sorted(map(key, docs))
    local = {key(doc): doc for doc in docs}
    for doc in rendered:
        assert doc == local[key(doc)], f"{key(doc)} renders differently with kubectl"


def test_every_file_is_a_resource() -> None:
    listed = set(kustomization()["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk, f"not in the kustomization: {sorted(on_disk - listed)}"


def test_built_in_kinds_validate_against_the_schemas(docs: list[dict[str, Any]]) -> None:
    checked = 0
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CRD_KINDS:
            continue  # no schema ships for CRDs: test_scaled_objects_are_well_formed
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        checked += 1
    assert checked >= 15


def test_the_validator_catches_a_broken_manifest(
    by_kind: dict[str, dict[str, dict[str, Any]]],
) -> None:
    """The schemas are really applied: a typo and a wrong type in a Deployment are refused."""
    deployment = copy.deepcopy(by_kind["Deployment"]["ragtime-api"])
    deployment["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError, match="two"):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)
    deployment = copy.deepcopy(by_kind["Deployment"]["ragtime-api"])
    container(deployment)["readinesProbe"] = container(deployment).pop("readinessProbe")
    with pytest.raises(kubernetes_validate.ValidationError, match="readinesProbe"):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_scaled_objects_are_well_formed(by_kind: dict[str, dict[str, dict[str, Any]]]) -> None:
    """KEDA's ScaledObject (keda.sh/v1alpha1), checked by hand: no schema ships for it."""
    scaled = by_kind["ScaledObject"]
    assert set(scaled) == {"ragtime-api", "sglang-small", "sglang-large"}
    for name, obj in scaled.items():
        spec = obj["spec"]
        assert set(spec) <= {
            "scaleTargetRef",
            "minReplicaCount",
            "maxReplicaCount",
            "pollingInterval",
            "cooldownPeriod",
            "advanced",
            "triggers",
        }, name
        assert spec["scaleTargetRef"]["name"] in by_kind["Deployment"], name
        assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"], name
        assert spec["triggers"], name
        for trigger in spec["triggers"]:
            assert trigger["type"] == "prometheus", f"{name}: only Prometheus triggers"
            assert trigger.get("metricType", "AverageValue") in ("AverageValue", "Value")
            meta = trigger["metadata"]
            assert set(meta) == {"serverAddress", "query", "threshold"}, name
            assert urlsplit(meta["serverAddress"]).scheme in ("http", "https")
            assert isinstance(meta["threshold"], str) and float(meta["threshold"]) > 0
        behavior = spec.get("advanced", {}).get("horizontalPodAutoscalerConfig", {})
        if behavior:  # the HPA behaviour KEDA passes on: validate it with the HPA's schema
            hpa = {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": name},
                "spec": {
                    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                    "maxReplicas": spec["maxReplicaCount"],
                    **behavior,
                },
            }
            kubernetes_validate.validate(hpa, KUBERNETES_VERSION, strict=True)


# Settings.


def test_every_ragtime_key_is_a_setting(docs: list[dict[str, Any]]) -> None:
    """Every RAGTIME_* key set anywhere (ConfigMap, Secret, container env) is a setting."""
    fields = {f"RAGTIME_{name.upper()}" for name in Settings.model_fields}
    keys: set[str] = set()
    for doc in docs:
        keys |= set(doc.get("data") or {}) | set(doc.get("stringData") or {})
        if doc["kind"] in ("Deployment", "Job"):
            keys |= {e["name"] for c in pod_spec(doc)["containers"] for e in c.get("env", [])}
    ragtime = {k for k in keys if k.startswith("RAGTIME_")}
    assert ragtime, "the API is configured through RAGTIME_* keys"
    assert ragtime <= fields, f"no such settings: {sorted(ragtime - fields)}"


def test_every_ragtime_name_in_the_files_is_a_setting_or_pending() -> None:
    """Comments included: a name in prose or a commented-out entry must exist too."""
    fields = {f"RAGTIME_{name.upper()}" for name in Settings.model_fields}
    for path in sorted(K8S.glob("*.yaml")):
        for name in set(SETTING_KEY.findall(path.read_text())):
            assert name in fields | PENDING_SETTINGS, f"{path.name}: {name} is no setting"


def test_pending_settings_are_not_settings_yet() -> None:
    fields = {f"RAGTIME_{name.upper()}" for name in Settings.model_fields}
    arrived = PENDING_SETTINGS & fields
    assert not arrived, (
        f"{sorted(arrived)} are settings now: drop them from PENDING_SETTINGS and uncomment "
        "them in deploy/k8s/config.yaml"
    )


def test_the_api_settings_validate(settings: Settings) -> None:
    assert settings.generation_backend == "routed"
    assert settings.host == "0.0.0.0"
    assert settings.workers == 1
    assert set(settings.model_pools) == {"small", "large"}


def test_api_and_ingest_read_the_same_config(
    by_kind: dict[str, dict[str, dict[str, Any]]],
) -> None:
    for workload in (by_kind["Deployment"]["ragtime-api"], by_kind["Job"]["ragtime-ingest"]):
        refs = container(workload)["envFrom"]
        assert {"configMapRef": {"name": "ragtime-config"}} in refs
        secret = next(r["secretRef"] for r in refs if "secretRef" in r)
        assert secret["name"] in by_kind["Secret"]


# The API: port, probes, shutdown, state.


def test_api_port_probes_and_scrape_annotations(
    by_kind: dict[str, dict[str, dict[str, Any]]], settings: Settings
) -> None:
    api = by_kind["Deployment"]["ragtime-api"]
    main = container(api)
    assert main["command"] == ["ragtime", "serve"]
    assert named_port(api, "http") == settings.port == Settings.model_fields["port"].default
    assert main["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert main["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        get = main[probe]["httpGet"]
        assert get["path"] in API_ROUTES, f"{probe}: no route {get['path']}"
        assert named_port(api, get["port"]) == settings.port
    notes = api["spec"]["template"]["metadata"]["annotations"]
    assert int(notes["prometheus.io/port"]) == settings.port
    assert notes["prometheus.io/path"] in API_ROUTES


def test_termination_waits_for_ragtimes_shutdown(
    by_kind: dict[str, dict[str, dict[str, Any]]], settings: Settings
) -> None:
    api = by_kind["Deployment"]["ragtime-api"]
    pre_stop = container(api)["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    needed = float(pre_stop[1]) + settings.shutdown_grace_s + AFTER_GRACE_S
    grace = pod_spec(api)["terminationGracePeriodSeconds"]
    assert grace >= needed, f"SIGKILL after {grace} s cuts ragtime's {needed} s shutdown short"
    assert grace <= needed + 10, "a grace far past the shutdown only slows rollouts"


def test_services_and_the_pdb_select_their_pods(
    by_kind: dict[str, dict[str, dict[str, Any]]],
) -> None:
    pods = {name: pod_labels(d) for name, d in by_kind["Deployment"].items()}
    for name, service in by_kind["Service"].items():
        chosen = [d for d, labels in pods.items() if selects(service["spec"]["selector"], labels)]
        assert chosen == [name], f"Service {name} selects {chosen}"
        workload = by_kind["Deployment"][name]
        for port in service["spec"]["ports"]:
            assert named_port(workload, port["targetPort"]) in {
                p["containerPort"] for p in container(workload)["ports"]
            }
    pdb = by_kind["PodDisruptionBudget"]["ragtime-api"]
    assert selects(pdb["spec"]["selector"]["matchLabels"], pods["ragtime-api"])
    for name, deployment in by_kind["Deployment"].items():
        assert selects(deployment["spec"]["selector"]["matchLabels"], pods[name]), name


def test_api_pods_read_the_data_volume_the_ingest_job_writes(
    by_kind: dict[str, dict[str, dict[str, Any]]], settings: Settings
) -> None:
    api, job = by_kind["Deployment"]["ragtime-api"], by_kind["Job"]["ragtime-ingest"]
    data_dir = str(settings.data_dir)
    api_mount, job_mount = mounts(api)[data_dir], mounts(job)[data_dir]
    assert api_mount["readOnly"] is True and not job_mount.get("readOnly")
    api_claim = volume(api, api_mount["name"])["persistentVolumeClaim"]
    job_claim = volume(job, job_mount["name"])["persistentVolumeClaim"]
    assert api_claim["readOnly"] is True
    assert api_claim["claimName"] == job_claim["claimName"]
    pvc = by_kind["PersistentVolumeClaim"][api_claim["claimName"]]
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"], "every node mounts it"
    # What an API pod does write goes elsewhere: the ONNX export, to a writable emptyDir.
    cache = str(settings.embedding_cache_path)
    writable = [p for p, m in mounts(api).items() if not m.get("readOnly")]
    assert any(cache.startswith(p + "/") for p in writable), f"{cache} is not writable"
    assert not cache.startswith(data_dir + "/")
    assert command(job)[:2] == ["ragtime", "ingest"]


# The GPU tier: pools, workers, gateways.


def test_each_pool_endpoint_is_its_gateway_and_the_gateway_its_pools_workers(
    by_kind: dict[str, dict[str, dict[str, Any]]], settings: Settings
) -> None:
    deployments, services = by_kind["Deployment"], by_kind["Service"]
    for pool, spec in settings.model_pools.items():
        (endpoint,) = spec.endpoints
        url = urlsplit(endpoint)
        service = services[str(url.hostname)]
        assert url.port in {p["port"] for p in service["spec"]["ports"]}
        selector = service["spec"]["selector"]
        (gateway_name,) = [d for d in deployments if selects(selector, pod_labels(deployments[d]))]
        gateway = deployments[gateway_name]
        args = command(gateway)
        assert args[:3] == ["python3", "-m", "sglang_router.launch_router"]
        assert int(flag_values(args, "--port")[0]) == named_port(gateway, "http")
        discovery = dict(item.split("=", 1) for item in flag_values(args, "--selector"))
        workers = [d for d in deployments if selects(discovery, pod_labels(deployments[d]))]
        assert workers == [f"sglang-{pool}"], f"{gateway_name} discovers {workers}"
        worker = deployments[workers[0]]
        worker_args = command(worker)
        assert flag_values(worker_args, "--model-path") == [spec.model]
        worker_port = int(flag_values(worker_args, "--port")[0])
        assert int(flag_values(args, "--service-discovery-port")[0]) == worker_port
        assert named_port(worker, "http") == worker_port


def test_gateways_use_flags_sglang_defines(by_kind: dict[str, dict[str, dict[str, Any]]]) -> None:
    gateways = [d for n, d in by_kind["Deployment"].items() if n.startswith("sglang-gateway-")]
    assert len(gateways) == 2
    role = by_kind["Role"]["sglang-gateway"]
    binding = by_kind["RoleBinding"]["sglang-gateway"]
    assert {"get", "list", "watch"} <= set(role["rules"][0]["verbs"])
    assert role["rules"][0]["resources"] == ["pods"]
    for gateway in gateways:
        assert command(gateway)[:3] == ["python3", "-m", "sglang_router.launch_router"]
        args = command(gateway)[3:]
        # The pinned gateway's own parser (sglang-router, the image's release): an unknown flag
        # or a wrong number of values exits.
        parsed = parse_router_args(args)
        assert parsed.policy == "cache_aware" and parsed.service_discovery
        assert parsed.selector == {
            "app.kubernetes.io/name": "sglang",
            "ragtime.dev/pool": gateway["metadata"]["labels"]["ragtime.dev/pool"],
        }
        main = container(gateway)
        for probe in ("readinessProbe", "livenessProbe"):
            assert main[probe]["httpGet"]["path"] in GATEWAY_ROUTES
        metrics_port = int(flag_values(args, "--prometheus-port")[0])
        assert named_port(gateway, "metrics") == metrics_port
        notes = gateway["spec"]["template"]["metadata"]["annotations"]
        assert int(notes["prometheus.io/port"]) == metrics_port
        account = pod_spec(gateway)["serviceAccountName"]
        assert account in by_kind["ServiceAccount"]
        bound = {(s["kind"], s["name"]) for s in binding["subjects"]}
        assert ("ServiceAccount", account) in bound
        namespace = flag_values(args, "--service-discovery-namespace")[0]
        env = {e["name"]: e for e in main.get("env", [])}
        assert namespace == "$(POD_NAMESPACE)"
        assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_each_pool_is_told_its_workers_context_and_batch(
    by_kind: dict[str, dict[str, dict[str, Any]]], config: dict[str, str]
) -> None:
    """The gateway (sglang-router 0.3.2) passes on neither fact: the pool's config says what
    its workers are launched with."""
    pools = json.loads(config["RAGTIME_MODEL_POOLS"])
    for pool, spec in pools.items():
        args = command(by_kind["Deployment"][f"sglang-{pool}"])
        assert spec["model"] == flag_values(args, "--model-path")[0]
        assert spec["context_length"] == int(flag_values(args, "--context-length")[0]), pool
        assert spec["max_running"] == int(flag_values(args, "--max-running-requests")[0]), pool


def test_every_image_is_pinned_to_what_was_tested(docs: list[dict[str, Any]]) -> None:
    """No ``:latest`` and no untagged image; SGLang is the release its simulated server follows,
    the gateway the sglang-router release the tests run behind."""
    images = {
        c["image"]
        for doc in docs
        if doc["kind"] in ("Deployment", "Job")
        for c in pod_spec(doc)["containers"]
    }
    for image in images:
        tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
        assert tag and tag != "latest", f"{image} is not pinned"
    assert f"lmsysorg/sglang:v{UPSTREAM_VERSION}" in images
    assert f"lmsysorg/sgl-model-gateway:v{version('sglang-router')}" in images


def test_workers_get_gpus_a_model_cache_and_metrics(
    by_kind: dict[str, dict[str, dict[str, Any]]],
) -> None:
    for pool in ("small", "large"):
        worker = by_kind["Deployment"][f"sglang-{pool}"]
        args = command(worker)
        assert args[:3] == ["python3", "-m", "sglang.launch_server"]
        for flag in ("--model-path", "--host", "--port", "--enable-metrics"):
            assert flag in args, f"sglang-{pool} is launched without {flag}"
        gpus = container(worker)["resources"]["limits"]["nvidia.com/gpu"]
        assert int(gpus) == int(flag_values(args, "--tp-size")[0]) >= 1
        assert container(worker)["resources"]["requests"]["nvidia.com/gpu"] == gpus
        cache = mounts(worker)["/root/.cache/huggingface"]
        claim = volume(worker, cache["name"])["persistentVolumeClaim"]["claimName"]
        assert claim in by_kind["PersistentVolumeClaim"]
        assert volume(worker, mounts(worker)["/dev/shm"]["name"])["emptyDir"]["medium"] == "Memory"
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            get = container(worker)[probe]["httpGet"]
            assert get["path"] == "/health"
            assert container(worker)[probe]["timeoutSeconds"] > 1, "/health takes >= 1 s"


# Autoscaling.


def queries(obj: dict[str, Any]) -> dict[str, str]:
    return {t["name"]: t["metadata"]["query"] for t in obj["spec"]["triggers"]}


def test_every_autoscaling_metric_is_exported(
    by_kind: dict[str, dict[str, dict[str, Any]]],
) -> None:
    ours = exported_metric_names()
    seen = set()
    for name, obj in by_kind["ScaledObject"].items():
        for query in queries(obj).values():
            for metric in METRIC_NAME.findall(query):
                seen.add(metric)
                known = ours if metric.startswith("ragtime_") else SGLANG_METRICS
                assert metric in known, f"{name}: {metric} is exported by no one"
    assert {"ragtime_requests_in_flight", "ragtime_ttft_seconds_bucket"} <= seen
    assert {"sglang:num_queue_reqs", "sglang:token_usage"} <= seen


def test_the_api_scales_on_in_flight_requests_and_ttft(
    by_kind: dict[str, dict[str, dict[str, Any]]], settings: Settings
) -> None:
    api = by_kind["ScaledObject"]["ragtime-api"]
    assert api["spec"]["scaleTargetRef"]["name"] == "ragtime-api"
    triggers = {t["name"]: t for t in api["spec"]["triggers"]}
    in_flight = triggers["in-flight"]
    routes = re.search(r'route=~"([^"]+)"', in_flight["metadata"]["query"])
    assert routes and set(routes.group(1).split("|")) == set(QUESTION_ROUTES)
    assert in_flight.get("metricType", "AverageValue") == "AverageValue", "per pod"
    assert float(in_flight["metadata"]["threshold"]) < settings.max_in_flight, (
        "scale out before pods refuse requests"
    )
    ttft = triggers["ttft-p95"]
    assert "histogram_quantile(0.95" in ttft["metadata"]["query"]
    assert ttft["metricType"] == "Value", "a latency is not divided among replicas"
    assert float(ttft["metadata"]["threshold"]) <= settings.ttft_target_ms / 1000


def test_gpu_workers_scale_on_queue_and_kv_cache_never_cpu(
    by_kind: dict[str, dict[str, dict[str, Any]]], settings: Settings
) -> None:
    for pool, spec in settings.model_pools.items():
        obj = by_kind["ScaledObject"][f"sglang-{pool}"]
        assert obj["spec"]["scaleTargetRef"]["name"] == f"sglang-{pool}"
        assert obj["spec"]["minReplicaCount"] >= 1, "a cold GPU worker takes minutes"
        found = queries(obj)
        assert {t["type"] for t in obj["spec"]["triggers"]} == {"prometheus"}
        assert not any("cpu" in q for q in found.values())
        assert "sglang:num_queue_reqs" in found["queue-depth"]
        assert "sglang:token_usage" in found["kv-occupancy"]
        for query in found.values():
            assert f'model_name="{spec.model}"' in query, f"{pool} must read its own workers"
        occupancy = next(t for t in obj["spec"]["triggers"] if t["name"] == "kv-occupancy")
        assert 0 < float(occupancy["metadata"]["threshold"]) < 1


def test_no_hpa_scales_on_cpu(docs: list[dict[str, Any]]) -> None:
    hpas = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    assert not hpas, "autoscaling is KEDA's (autoscaling.yaml)"


def test_model_pools_json_matches_the_readme_shape(config: dict[str, str]) -> None:
    pools = json.loads(config["RAGTIME_MODEL_POOLS"])
    assert all({"model", "endpoints"} <= set(p) for p in pools.values())
