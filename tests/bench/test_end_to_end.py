"""One short run of ``ragtime bench load`` against a real ragtime server on the null backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.commands import main
from bench.harness.results import BenchResult
from tests.helpers.bench_results import null_config


@pytest.mark.slow
def test_null_backend_against_the_floor(
    minilm_data_dir: Path, minilm_api_key: str, tmp_path: Path
) -> None:
    config = null_config(tmp_path, minilm_data_dir, minilm_api_key)
    out = tmp_path / "run.json"
    argv = [
        "bench", "load", "--serve", str(config), "--floor", "--concurrency", "2",
        "--requests", "20", "--rounds", "2", "--warmup", "2", "--json", str(out),
        "--log-dir", str(tmp_path / "logs"), "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    raw = json.loads(out.read_text())
    result = BenchResult.model_validate(raw)
    assert [t.name for t in result.targets] == ["floor", "null"]
    assert "RAGTIME_API_KEY" not in result.targets[1].config  # never written to the record
    floor, null = result.runs
    assert floor.summary.ok == null.summary.ok == 20
    assert floor.summary.tokens.p50 == null.summary.tokens.p50 == 8
    assert {"embed", "search", "assemble", "generate"} <= set(null.summary.stages_ms)
    assert null.summary.degradations == {}  # no reranker configured: nothing given up
    assert null.summary.budget_exceeded_ratio == 0.0 and null.summary.within_budget_ratio == 1.0
    (comparison,) = result.comparisons
    assert (comparison.baseline, comparison.other) == ("floor", "null")
    assert comparison.ttft_ms["p50"].diff is not None
