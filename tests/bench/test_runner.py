"""Whole runs against the floor (a real uvicorn process): alternation, sweeps, the CLI, plots."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli.commands import main
from bench.harness import runner
from bench.harness.client import Target
from bench.harness.results import BenchResult, Run
from bench.harness.runner import LoadSpec, measure, sweep
from bench.harness.serve import ServerProcess, floor_server
from tests.helpers.bench_results import make_run

QUESTIONS = ["one?", "two?", "three?"]


@pytest.fixture(scope="module")
def floors() -> Iterator[list[ServerProcess]]:
    with floor_server(4, name="floor-a") as a, floor_server(8, name="floor-b") as b:
        yield [a, b]


@pytest.mark.process
async def test_two_targets_alternate_and_are_compared(floors: list[ServerProcess]) -> None:
    targets = [Target(s.name, s.url) for s in floors]
    spec = LoadSpec(users=2, requests=12, rounds=3, warmup=2)
    runs = await measure(targets, QUESTIONS, spec, show_progress=False)
    assert [r.target for r in runs] == ["floor-a", "floor-b"]
    for run, tokens in zip(runs, (4, 8), strict=True):
        assert run.summary.requests == 12 and run.summary.ok == 12
        assert run.summary.tokens.p50 == tokens
        assert sorted(r.index for r in run.requests) == list(range(12))
        assert run.load == "2 users" and run.wall_s > 0


@pytest.mark.process
async def test_a_rate_sweep_finds_ceilings(floors: list[ServerProcess]) -> None:
    targets = [Target(floors[0].name, floors[0].url)]
    spec = LoadSpec(rate=20, requests=10)
    runs, ceilings = await sweep(targets, QUESTIONS, spec, [40, 20], show_progress=False)
    assert [r.rate for r in runs] == [20, 40]
    (ceiling,) = ceilings
    assert ceiling.target == "floor-a" and ceiling.baseline_rate == 20


@pytest.mark.process
def test_cli_load_writes_json_and_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, plots = tmp_path / "run.json", tmp_path / "plots"
    questions = tmp_path / "q.txt"
    questions.write_text("# comment\nfirst?\n\nsecond?\n")
    argv = [
        "bench", "load", "--floor", "--floor-tokens", "3", "--questions", str(questions),
        "--rates", "20,40", "--requests", "8", "--warmup", "1", "--json", str(out),
        "--plots", str(plots), "--log-dir", str(tmp_path / "logs"), "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    raw = json.loads(out.read_text())
    result = BenchResult.model_validate(raw)
    assert result.command.startswith("ragtime bench load --floor")
    assert [t.kind for t in result.targets] == ["floor"]
    assert [r.summary.ok for r in result.runs] == [8, 8]
    assert result.ceilings[0].target == "floor"
    assert result.machine["cores"] and result.versions["fastapi"]
    names = sorted(p.name for p in plots.iterdir())
    assert names == ["latency-cdf.png", "ttft-vs-load.png"]  # the floor reports no stages
    assert all((plots / n).read_bytes().startswith(b"\x89PNG") for n in names)
    printed = capsys.readouterr().out
    assert "| floor | 20 req/s | 8/8 |" in printed


async def test_a_sweep_stops_after_two_failing_rates(monkeypatch: pytest.MonkeyPatch) -> None:
    p99_at = {10: 10.0, 20: 25.0, 30: 12.0, 40: 30.0, 50: 30.0, 60: 11.0}
    measured: list[float] = []

    async def fake_measure(
        targets: list[Target], questions: list[str], spec: LoadSpec, **_: object
    ) -> list[Run]:
        assert spec.rate is not None
        measured.append(spec.rate)
        return [make_run(t.name, [p99_at[int(spec.rate)]] * 20, rate=spec.rate) for t in targets]

    monkeypatch.setattr(runner, "measure", fake_measure)
    spec = LoadSpec(rate=10, requests=20)
    runs, (ceiling,) = await sweep([Target("t", "u")], QUESTIONS, spec, list(p99_at), patience=2)
    assert measured == [10, 20, 30, 40, 50]  # the stall at 20 alone did not end it
    assert [r.rate for r in runs] == measured
    assert ceiling.ceiling_rps == 30 and ceiling.first_failing_rps == 40
    assert "isolated failures below the ceiling at 20 req/s" in ceiling.reason


async def test_one_user_keeps_the_question_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Grouped questions (the prefix-caching bench) reach each target in file order."""
    sent: list[tuple[str, str]] = []
    real = runner.ask_stream

    async def recording(client: object, target: Target, question: str, **kw: object) -> object:
        sent.append((target.name, question))
        return await real(client, target, question, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "ask_stream", recording)
    questions = [f"q{i}" for i in range(6)]
    targets = [Target("a", "http://127.0.0.1:9"), Target("b", "http://127.0.0.1:9")]
    spec = LoadSpec(users=1, requests=6, rounds=2, timeout_s=2.0)
    await measure(targets, questions, spec, show_progress=False)
    for name in ("a", "b"):
        assert [q for t, q in sent if t == name] == questions
    assert [t for t, _ in sent] == ["a"] * 3 + ["b"] * 6 + ["a"] * 3  # rounds alternate
