"""Summaries, comparisons and ceilings of records; the JSON file's schema; config files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.harness.record import read_json, write_json
from bench.harness.results import (
    SCHEMA_VERSION,
    BenchResult,
    TargetInfo,
    compare,
    find_ceiling,
    summarize_run,
)
from bench.harness.runner import LoadSpec
from bench.harness.serve import config_key, read_config
from tests.helpers.bench_results import make_run, record


def test_summary_of_a_run() -> None:
    records = [record(i, ttft=float(i)) for i in range(1, 11)] + [record(11, outcome="http_error")]
    s = summarize_run(records, 2.0)
    assert (s.requests, s.ok, s.errors) == (11, 10, 1)
    assert s.error_ratio == pytest.approx(1 / 11, abs=1e-4)
    assert s.throughput_rps == 5.0
    assert s.ttft_ms.n == 10 and s.ttft_ms.p50 == 5.5
    assert s.itl_ms.n == 20 and s.itl_ms.p50 == 2.0  # gaps pooled over every request
    assert s.e2e_ms.max == 30.0
    assert s.within_budget_ratio == pytest.approx(5 / 11, abs=1e-4)  # ttft <= 5 of 11
    assert s.budget_exceeded_ratio == 0.5
    assert s.stages_ms["embed"].n == 10 and s.degradations == {"rerank_skipped": 10}
    assert s.outcomes == {"http_error": 1, "ok": 10} and s.statuses == {"200": 10, "503": 1}


def test_comparisons_are_against_the_first_target() -> None:
    runs = [make_run("floor", [1.0] * 10), make_run("ragtime", [4.0] * 10)]
    (c,) = compare(runs)
    assert (c.baseline, c.other, c.load) == ("floor", "ragtime", "1 user")
    assert c.ttft_ms["p50"].diff == 3.0 and c.ttft_ms["p50"].ratio == 4.0
    assert c.e2e_ms["p99"].diff == 3.0 and c.throughput_ratio == 1.0


def test_ceiling_is_the_last_rate_before_ttft_p99_doubles() -> None:
    runs = [
        make_run("r", [10.0] * 50, rate=10),
        make_run("r", [15.0] * 50, rate=50),
        make_run("r", [25.0] * 50, rate=100),
        make_run("r", [40.0] * 50, rate=200),
    ]
    c = find_ceiling(runs)
    assert c.baseline_ttft_p99_ms == 10.0 and c.limit_ttft_p99_ms == 20.0
    assert c.ceiling_rps == 50 and c.first_failing_rps == 100
    assert c.reason == "at 100 req/s TTFT p99 was 25.0 ms (limit 20.0 ms), errors 0.0%"


def test_a_failure_below_a_rate_that_held_is_a_blip() -> None:
    runs = [
        make_run("r", [10.0] * 50, rate=10),
        make_run("r", [25.0] * 50, rate=50),  # one stall
        make_run("r", [12.0] * 50, rate=100),
        make_run("r", [30.0] * 50, rate=200),
    ]
    c = find_ceiling(runs)
    assert c.ceiling_rps == 100 and c.first_failing_rps == 200
    assert c.reason.endswith("; isolated failures below the ceiling at 50 req/s")


def test_no_failure_at_all() -> None:
    c = find_ceiling([make_run("r", [10.0] * 50, rate=10), make_run("r", [11.0] * 50, rate=20)])
    assert c.ceiling_rps == 20 and c.first_failing_rps is None
    assert c.reason == "TTFT p99 stayed under 2x its value at 10 req/s throughout"


def test_errors_end_the_ceiling_too() -> None:
    runs = [make_run("r", [10.0] * 50, rate=10), make_run("r", [10.0] * 50, rate=20, errors=5)]
    assert find_ceiling(runs).ceiling_rps == 10


def test_json_file_schema(tmp_path: Path) -> None:
    result = BenchResult(
        created="2026-12-02T00:00:00+00:00",
        command="ragtime bench load --concurrency 1",
        machine={"cores": 2},
        versions={"ragtime": "0.1.0"},
        targets=[TargetInfo(name="a", url="http://127.0.0.1:1", kind="url")],
        runs=[make_run("a", [1.0, 2.0, 3.0])],
    )
    path = tmp_path / "out.json"
    write_json(result, path)
    raw = json.loads(path.read_text())
    assert raw["schema_version"] == SCHEMA_VERSION == "ragtime-bench/1"
    assert set(raw) == {
        "schema_version", "created", "command", "machine", "versions", "targets", "runs",
        "comparisons", "ceilings", "notes",
    }  # fmt: skip
    run = raw["runs"][0]
    assert set(run) == {"target", "load", "mode", "users", "rate", "wall_s", "summary", "requests"}
    for metric in ("ttft_ms", "itl_ms", "e2e_ms"):
        assert set(run["summary"][metric]) == {"n", "p50", "p95", "p99", "mean", "min", "max"}
    assert run["summary"]["ttft_ms"]["n"] == 3
    req = run["requests"][0]
    assert {"ttft_ms", "itl_ms_mean", "e2e_ms", "within_budget", "budget_exceeded", "status",
            "degradations", "timings_ms", "outcome", "start_lag_ms"} <= set(req)  # fmt: skip
    assert "itl_ms" not in req  # pooled into the summary, not stored per request
    assert {"prompt_tokens", "cached_tokens", "completion_tokens"} <= set(req)
    summary = run["summary"]
    assert {"prompt_tokens", "cached_tokens", "cached_ratio", "cached_ratio_n"} <= set(summary)
    assert read_json(path).runs[0].summary == result.runs[0].summary
    schema = BenchResult.model_json_schema()
    assert {"created", "command", "machine", "versions", "targets", "runs"} <= set(
        schema["required"]
    )


def test_cached_ratio_sums_tokens_over_the_answered() -> None:
    records = [record(i) for i in range(4)]
    for r, (prompt, cached) in zip(records, [(100, 0), (100, 90), (200, 150)], strict=False):
        r.prompt_tokens, r.cached_tokens = prompt, cached  # records[3] reported no usage
    failed = record(9, outcome="http_error")
    failed.prompt_tokens, failed.cached_tokens = 1000, 1000  # not answered: not counted
    s = summarize_run([*records, failed], 2.0)
    assert (s.prompt_tokens, s.cached_tokens, s.cached_ratio_n) == (400, 240, 3)
    assert s.cached_ratio == 0.6
    assert summarize_run([record(0)], 1.0).cached_ratio is None


def test_files_without_usage_still_read(tmp_path: Path) -> None:
    """JSON written before usage was recorded: the new fields take their defaults."""
    result = BenchResult(
        created="2026-12-02T00:00:00+00:00", command="c", machine={}, versions={},
        targets=[TargetInfo(name="a", url="http://127.0.0.1:1", kind="url")],
        runs=[make_run("a", [1.0, 2.0])],
    )  # fmt: skip
    raw = json.loads(result.model_dump_json())
    for run in raw["runs"]:
        for key in ("prompt_tokens", "cached_tokens", "cached_ratio", "cached_ratio_n"):
            del run["summary"][key]
        for req in run["requests"]:
            for key in ("prompt_tokens", "cached_tokens", "completion_tokens"):
                del req[key]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(raw))
    old = read_json(path).runs[0]
    assert old.summary.cached_ratio is None and old.summary.cached_ratio_n == 0
    assert old.requests[0].prompt_tokens is None


def test_env_config(tmp_path: Path) -> None:
    path = tmp_path / "null.env"
    path.write_text(
        "# a bench config\n\nRAGTIME_GENERATION_BACKEND=null\n"
        "export RAGTIME_MAX_OUTPUT_TOKENS = 16\nRAGTIME_DATA_DIR='/data dir'\n"
    )
    assert read_config(path) == {
        "RAGTIME_GENERATION_BACKEND": "null",
        "RAGTIME_MAX_OUTPUT_TOKENS": "16",
        "RAGTIME_DATA_DIR": "/data dir",
    }
    path.write_text("not a setting\n")
    with pytest.raises(ValueError, match="KEY=VALUE"):
        read_config(path)


def test_json_config_and_its_key(tmp_path: Path) -> None:
    (tmp_path / "demo-api-key").write_text("rt_demo\n")
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"RAGTIME_DATA_DIR": str(tmp_path), "RAGTIME_RECORD_CONTENT": True}))
    config = read_config(path)
    assert config == {"RAGTIME_DATA_DIR": str(tmp_path), "RAGTIME_RECORD_CONTENT": "true"}
    assert config_key(config) == "rt_demo"
    assert config_key({**config, "RAGTIME_API_KEY": "rt_given"}) == "rt_given"


def test_load_spec() -> None:
    assert LoadSpec(users=2, requests=10, rounds=4).round_sizes() == [3, 3, 3, 1]
    assert LoadSpec(users=1, requests=2, rounds=4).round_sizes() == [1, 1]
    assert LoadSpec(rate=5, duration_s=3, rounds=3).round_sizes() == [None] * 3
    assert LoadSpec(users=2, requests=1).label == "2 users"
    assert LoadSpec(rate=2.5, requests=1).label == "2.5 req/s"
    with pytest.raises(ValueError):
        LoadSpec(users=1, rate=1, requests=1)
    with pytest.raises(ValueError):
        LoadSpec(users=1)
