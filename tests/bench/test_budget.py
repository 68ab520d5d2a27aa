"""``ragtime bench budget``: the within-budget accounting, the JSON schema, the report, the
machinery measurement and the bench-only tiny cross-encoder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.commands import main
from bench.harness.client import RequestRecord
from bench.harness.results import Run, TargetInfo, summarize_run
from bench.suites.budget.faults import (
    SCHEMA_VERSION,
    BudgetResult,
    FaultRuns,
    cells_table,
    classify,
    policy_met,
    read_budget_json,
    summarize_cell,
    text_report,
    write_budget_json,
)
from bench.suites.machinery.cost import MachineryCost, measure_machinery
from tests.helpers.bench_results import make_result, make_run


def rec(
    i: int,
    *,
    status: int = 200,
    outcome: str = "ok",
    e2e: float | None = 900.0,
    exceeded: bool | None = False,
    degradations: tuple[str, ...] = (),
    error: str | None = None,
) -> RequestRecord:
    ok = outcome == "ok"
    return RequestRecord(
        target="t",
        index=i,
        scheduled_s=0.0,
        start_lag_ms=0.0,
        status=status,
        outcome=outcome,
        error=error,
        ttft_ms=e2e / 2 if ok and e2e is not None else None,
        e2e_ms=e2e,
        tokens=4 if ok else 0,
        budget_ms=1000.0,
        budget_exceeded=exceeded if ok else None,
        degradations=list(degradations),
        finish_reason="stop" if ok else None,
    )


def test_classify() -> None:
    assert classify(rec(0)) == "answered_within"
    assert classify(rec(1, e2e=1200.0, exceeded=True)) == "over_budget"
    # The server's verdict wins over the client's clock (which includes the transfer).
    assert classify(rec(2, e2e=1001.0, exceeded=False)) == "answered_within"
    assert classify(rec(3, e2e=1200.0, exceeded=None)) == "over_budget"
    assert classify(rec(4, status=504, outcome="http_error", e2e=300.0)) == "failed_fast"
    assert classify(rec(5, status=504, outcome="http_error", e2e=1300.0)) == "over_budget"
    deadline = "deadline_exceeded: no answer token came before the deadline"
    assert classify(rec(6, outcome="stream_error", e2e=990.0, error=deadline)) == "failed_fast"
    assert classify(rec(7, status=503, outcome="http_error", e2e=5.0)) == "error"
    assert classify(rec(8, status=0, outcome="timeout", e2e=None)) == "over_budget"


def cell_run(target: str, records: list[RequestRecord], users: int = 1) -> Run:
    records = [r.model_copy(update={"target": target}) for r in records]
    return Run(
        target=target,
        load=f"{users} user" + "s" * (users > 1),
        mode="closed",
        users=users,
        wall_s=10.0,
        summary=summarize_run(records, 10.0),
        requests=records,
    )


def synthetic() -> BudgetResult:
    on = cell_run(
        "generate-fault-policy-on",
        [rec(i, degradations=("output_capped", "rerank_skipped")) for i in range(7)]
        + [rec(7, status=504, outcome="http_error", e2e=200.0)],
    )
    off = cell_run(
        "generate-fault-policy-off",
        [rec(i) for i in range(4)] + [rec(i, e2e=1500.0, exceeded=True) for i in range(4, 8)],
    )
    cells = [
        summarize_cell(on, fault="generate", fault_ms=80.0, policy=True, budget_ms=1000.0),
        summarize_cell(off, fault="generate", fault_ms=80.0, policy=False, budget_ms=1000.0),
    ]
    target = TargetInfo(name=on.target, url="u", kind="ragtime", config_path="b.env")
    return BudgetResult(
        created="2026-12-02T00:00:00+00:00",
        command="ragtime bench budget --serve b.env --budget-ms 1000",
        machine={"cores": 2},
        versions={"python": "3.11.7"},
        budget_ms=1000,
        config_path="benchmarks/budget.env",
        config={"RAGTIME_DATA_DIR": "bench-results/data", "RAGTIME_MAX_OUTPUT_TOKENS": "64"},
        loads=["1x: a closed loop of 1 user"],
        cells=cells,
        faults=[
            FaultRuns(
                fault="generate",
                variable="RAGTIME_FAULT_GENERATE_TOKEN_DELAY_MS",
                fault_ms=80.0,
                targets=[target],
                runs=[on, off],
            )
        ],
        machinery=MachineryCost(
            iterations=10,
            stages=8,
            per_request_ms=make_run("m", [0.3] * 10).summary.ttft_ms,
            met=True,
        ),
    )


def test_cells_account_for_every_request() -> None:
    on, off = synthetic().cells
    assert (on.requests, on.answered_within, on.failed_fast, on.over_budget) == (8, 7, 1, 0)
    assert on.answered_within_ratio == pytest.approx(0.875)
    assert on.failed_fast_ratio == pytest.approx(0.125)
    assert on.degradations == {"output_capped": 7, "rerank_skipped": 7}
    assert on.degraded_requests == 7
    assert on.ttft_ms.n == 7 and on.e2e_all_ms.n == 8
    assert on.statuses == {"200": 7, "504": 1}
    assert (off.answered_within, off.over_budget, off.errors) == (4, 4, 0)
    assert off.degradations == {} and off.degraded_requests == 0
    assert not policy_met([on, off])
    assert policy_met([on.model_copy(update={"answered_within_ratio": 0.99}), off])


def test_json_schema_round_trip(tmp_path: Path) -> None:
    res = synthetic()
    path = tmp_path / "budget.json"
    write_budget_json(res, path)
    data = json.loads(path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION == "ragtime-bench-budget/1"
    assert {"budget_ms", "cells", "faults", "machinery", "loads", "config"} <= set(data)
    cell = data["cells"][0]
    for key in (
        "fault", "fault_ms", "policy", "load", "users", "requests", "answered_within",
        "failed_fast", "over_budget", "errors", "answered_within_ratio", "ttft_ms", "e2e_ms",
        "degradations",
    ):  # fmt: skip
        assert key in cell
    for key in ("n", "p50", "p95", "p99"):
        assert key in cell["ttft_ms"] and key in cell["e2e_ms"]
    assert data["faults"][0]["runs"][0]["requests"][0]["degradations"] == [
        "output_capped",
        "rerank_skipped",
    ]
    assert read_budget_json(path) == res


def test_text_report() -> None:
    text = text_report(synthetic())
    assert "| generate +80 ms | on | 1 user | 8 | 7 (88%) | 1 (12%) | 0 (0%) | 0 |" in text
    assert "7 of 7 answered requests carried an action planned by the policy" in text
    assert "output_capped 7, rerank_skipped 7; 7 of 7" in text
    assert "NOT met" in text
    assert cells_table([]).count("\n") == 1


@pytest.mark.usefixtures("unrendered_plots")
def test_report_adds_the_budget_section(tmp_path: Path) -> None:
    res = make_result("ragtime bench load", [make_run("null", [1.0] * 5)], [])
    res.targets.append(TargetInfo(name="null", url="u", kind="ragtime"))
    paths = {}
    for name in ("cpu", "overhead"):
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(res.model_dump_json())
    ceiling = make_result("c", [make_run("null", [1.0] * 5, rate=5)], res.targets)
    paths["ceiling"] = tmp_path / "ceiling.json"
    paths["ceiling"].write_text(ceiling.model_dump_json())
    paths["budget"] = tmp_path / "budget.json"
    write_budget_json(synthetic(), paths["budget"])
    out = tmp_path / "BENCHMARKS.md"
    argv = ["bench", "report", "--out", str(out), "--plots", str(tmp_path / "plots")]
    for name in ("cpu", "overhead", "ceiling", "budget"):
        argv += [f"--{name}", str(paths[name])]
    assert main(argv) == 0
    text = out.read_text()
    assert "## 4. The budget under faults" in text
    assert "generate fault (+80 ms), policy on against off: 1 user: on 88%, off 50% (n=8" in text
    assert "Target at least 99% answered within budget with the policy on" in text
    assert "budget and tracing machinery per request (8 stages" in text
    assert "ragtime bench budget --serve b.env --budget-ms 1000" in text
    assert "RAGTIME_MAX_OUTPUT_TOKENS=64" in text
    assert text.index("## 3.") < text.index("## 4.") < text.index("## Reading")


def test_machinery_measurement() -> None:
    cost = measure_machinery(50, warmup=5)
    assert cost.iterations == 50 and cost.stages == 12  # attribute is the twelfth
    assert cost.per_request_ms.n == 50
    assert cost.per_request_ms.p50 is not None and cost.per_request_ms.p50 > 0
    unsampled = cost.unsampled_ms
    assert unsampled is not None and unsampled.n == 50 and unsampled.p50 is not None
    assert cost.met == (cost.per_request_ms.p50 <= 0.8 and unsampled.p50 <= 0.4)


def test_machinery_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.json"
    assert main(["bench", "machinery", "--iterations", "20", "--json", str(path)]) == 0
    assert "budget and tracing machinery per request" in capsys.readouterr().out
    assert MachineryCost.model_validate_json(path.read_text()).per_request_ms.n == 20


@pytest.mark.slow
def test_tiny_cross_encoder_loads(tmp_path: Path) -> None:
    """What the bench builds in a subprocess loads as a sentence-transformers ``CrossEncoder``
    and scores. Slow: torch and sentence-transformers are imported twice over, in the builder
    and here (about 8 s on 2 cores); it is the only test of the bench's builder."""
    from sentence_transformers import CrossEncoder

    from bench.harness.tiny_cross_encoder import build_tiny_cross_encoder

    model_dir = build_tiny_cross_encoder(tmp_path / "ce")
    model = CrossEncoder(str(model_dir), device="cpu")
    scores = model.predict([("what is a list", "a list holds values"), ("how", "python loop")])
    assert len(scores) == 2
