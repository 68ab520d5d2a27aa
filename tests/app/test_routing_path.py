"""The service answering through the router: settings, and the route on the ``generate`` span."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.pipeline.services import default_backend
from bench.sglang_sim.server import SimulatedSGLang
from bench.sglang_sim.tokenizer import build_tiny_tokenizer
from inference import HFTokenizer, RemoteOptions, RoutedBackend
from tests.fakes._serve import ServerThread
from tests.helpers.app import app_state, make_settings, running_app
from tracing.budget import GenerationPrior

POOLS = {
    "small": {"model": "org/small", "endpoints": ["http://s1:30000", "http://s2:30000/"]},
    "large": {"model": "org/large", "endpoints": ["http://l1:30000"]},
}


@pytest.fixture(scope="module")
def two_fakes() -> Iterator[tuple[SimulatedSGLang, str, SimulatedSGLang, str]]:
    small, large = SimulatedSGLang(), SimulatedSGLang()
    with ServerThread(small.app) as s, ServerThread(large.app) as big:
        yield small, s.url, large, big.url


def test_settings_build_the_router(tmp_path: Path) -> None:
    router = default_backend(
        make_settings(
            tmp_path,
            generation_backend="routed",
            model_pools=POOLS,
            route_rules={"rules": [["large", "why"]], "long_chars": 100},
            remote_poll_interval_s=0.5,
            served_tokenizer="/models/tok",
        )
    )
    assert isinstance(router, RoutedBackend)
    assert sorted(router.endpoints) == ["http://l1:30000", "http://s1:30000", "http://s2:30000"]
    assert router.options.poll_interval_s == 0.5 and router.budget_pool == "small"
    assert router.options.max_attempts == 1 and router.options.health_timeout_s == 5.0
    assert router.classifier.long_chars == 100
    assert isinstance(router.tokenizer, HFTokenizer)
    assert router.tokenizer.name_or_path == "/models/tok"
    assert router.model == "small=org/small,large=org/large"
    # The budget weighs each target's plans with the curves of the model its pool serves.
    assert router.target_model("http://s2:30000") == "org/small"
    assert router.target_model("http://l1:30000/") == "org/large"
    assert router.target_model("http://elsewhere:30000") is None


@pytest.mark.parametrize(
    "overrides",
    [
        {"generation_backend": "routed"},
        {"generation_backend": "routed", "model_pools": {"small": {"model": "m"}}},
        {
            "generation_backend": "routed",
            "model_pools": {**POOLS, "large": {"model": "m", "endpoints": []}},
        },
        {
            "generation_backend": "routed",
            "model_pools": {**POOLS, "large": {"model": "m", "endpoints": ["http://s1:30000"]}},
        },
        {
            "generation_backend": "routed",
            "model_pools": {**POOLS, "large": {**POOLS["large"], "extra": 1}},
        },
        {"generation_backend": "routed", "model_pools": {"small": {"endpoints": ["http://a"]}}},
        {"generation_backend": "routed", "model_pools": {"small": POOLS["small"]}},  # no large
        {"generation_backend": "routed", "model_pools": POOLS, "route_rules": {"rules": "x"}},
        {
            "generation_backend": "routed",
            "model_pools": {**POOLS, "large": {"model": "m", "endpoints": ["l1:30000"]}},
        },
    ],
)
def test_routed_settings_fail_fast(tmp_path: Path, overrides: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        make_settings(tmp_path, **overrides)


def test_each_question_is_routed_and_the_span_says_why(
    seeded_data_dir: Path,
    auth: dict[str, str],
    two_fakes: tuple[SimulatedSGLang, str, SimulatedSGLang, str],
    span_exporter: InMemorySpanExporter,
    tmp_path: Path,
) -> None:
    small, small_url, large, large_url = two_fakes
    small.reset(natural_tokens=6)
    large.reset(natural_tokens=6)
    tokenizer = HFTokenizer(build_tiny_tokenizer(tmp_path), local_files_only=True)
    router = RoutedBackend.sglang(
        {
            "small": {"model": "fake/small", "endpoints": [small_url]},
            "large": {"model": "fake/large", "endpoints": [large_url]},
        },
        tokenizer=tokenizer,
        options=RemoteOptions(poll_interval_s=30.0),
    )
    with running_app(
        seeded_data_dir, backend=router, calibrate=False
    ) as client:  # counts /generate
        assert client.get("/readyz").status_code == 200
        span_exporter.clear()
        for question in ("What is a list?", "Why would I use a tuple instead of a list?"):
            answer = client.post("/v1/ask", json={"question": question}, headers=auth)
            assert answer.status_code == 200, answer.text
    assert len(small.generate_requests) == 1 and len(large.generate_requests) == 1
    generate = [s.attributes or {} for s in span_exporter.get_finished_spans()]
    routed = [a for a in generate if "ragtime.route.pool" in a]
    assert [(a["ragtime.route.pool"], a["ragtime.route.reason"]) for a in routed] == [
        ("small", "classifier"),
        ("large", "classifier"),
    ]
    assert [a["gen_ai.request.model"] for a in routed] == ["fake/small", "fake/large"]
    assert routed[1]["ragtime.route.endpoint"] == large_url


def test_a_tight_budget_answers_with_the_smaller_model_and_says_so(
    seeded_data_dir: Path,
    auth: dict[str, str],
    two_fakes: tuple[SimulatedSGLang, str, SimulatedSGLang, str],
    tmp_path: Path,
) -> None:
    """One cost model decides: the budget plans the answer at the large model's costs (as its
    calibration would find them), finds that not even its smallest plan fits 1.5 s, and sends
    it to the small one, saying so."""
    small, small_url, large, large_url = two_fakes
    small.reset(natural_tokens=4)
    large.reset(natural_tokens=4, ttft_s=1.0, itl_s=0.05)
    router = RoutedBackend.sglang(
        {
            "small": {"model": "fake/small", "endpoints": [small_url]},
            "large": {"model": "fake/large", "endpoints": [large_url]},
        },
        tokenizer=HFTokenizer(build_tiny_tokenizer(tmp_path), local_files_only=True),
        options=RemoteOptions(poll_interval_s=0.2),
    )
    question = {"question": "Why would I use a tuple instead of a list?"}
    with running_app(seeded_data_dir, backend=router, calibrate=False) as client:
        cost = app_state(client).budget.cost
        cost.calibrate(large_url, GenerationPrior(1000.0, 0.05, 50.0, source="calibration"))
        cost.calibrate(small_url, GenerationPrior(30.0, 0.05, 5.0, source="calibration"))
        roomy = client.post("/v1/ask", json={**question, "budget_ms": 60000}, headers=auth)
        tight = client.post("/v1/ask", json={**question, "budget_ms": 1500}, headers=auth)
    assert roomy.status_code == 200, roomy.text
    assert "smaller_model" not in [d["action"] for d in roomy.json()["degradations"]]
    assert tight.status_code == 200, tight.text
    degradations = tight.json()["degradations"]
    smaller = [d for d in degradations if d["action"] == "smaller_model"]
    assert len(smaller) == 1, degradations
    assert smaller[0]["stage"] == "generate" and smaller[0]["reason"].startswith(small_url)
    assert f"the smallest plan at {large_url} needs about" in smaller[0]["reason"]
