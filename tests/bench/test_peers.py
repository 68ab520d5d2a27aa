"""``ragtime bench peers``: the figures across runs and ragtime's ratios to the other targets,
and a clear refusal without the bench-peers extra."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from bench.harness.results import Ceiling
from bench.suites.ceiling.results import Sweep
from bench.suites.ceiling.wrk import LatencyMs, WrkPhase
from bench.suites.peers import command
from bench.suites.peers.results import (
    PeersRun,
    TargetLoad,
    figures,
    ratios,
    target_load,
)


def load(target: str, users: int, cpu: float, ttft: float) -> TargetLoad:
    return TargetLoad(
        target=target, users=users, requests=100, errors=0, ttft_p50_ms=ttft, ttft_p95_ms=None,
        e2e_p50_ms=None, throughput_rps=1.0, cpu_ms_per_request=cpu, prompt_tokens_mean=None,
    )  # fmt: skip


def sweep(target: str, ceiling: float, cpu: float) -> Sweep:
    phase = WrkPhase(
        target=target, rate=ceiling, seconds=3, connections=8, sent=10, answered=10, bad=0,
        transport_errors=0, timeouts=0, late=0, late_ms_max=0, latency_ms=LatencyMs(n=10),
        error_ratio=0, answered_rps=ceiling, server_cpu_ms=cpu,
    )  # fmt: skip
    return Sweep(
        target=target,
        phases=[phase],
        ceiling=Ceiling(
            target=target,
            baseline_rate=10.0,
            baseline_ttft_p99_ms=None,
            limit_ttft_p99_ms=None,
            ceiling_rps=ceiling,
            first_failing_rps=None,
            reason="held",
        ),
    )


RUNS = [
    PeersRun(
        number=n,
        loads=[load("ragtime", 1, 12.0 + n, 10.0), load("haystack", 1, 30.0, 20.0)],
        sweeps=[sweep("ragtime", 100.0 + n, 9.0), sweep("haystack", 50.0, 25.0)],
    )
    for n in (1, 2, 3)
]


def test_each_figure_is_the_median_and_range_across_runs() -> None:
    got = {
        (f.target, f.users, f.measure): f.spread
        for f in figures(RUNS, ["ragtime", "haystack"], [1])
    }
    cpu = got["ragtime", 1, "cpu_ms_per_request"]
    assert cpu is not None and (cpu.median, cpu.min, cpu.max) == (14.0, 13.0, 15.0)
    ceiling = got["ragtime", None, "ceiling_rps"]
    assert ceiling is not None and ceiling.median == 102.0
    assert got["haystack", None, "ceiling_cpu_ms"].median == 25.0  # type: ignore[union-attr]
    assert got["haystack", None, "peak_rps"].median == 50.0  # type: ignore[union-attr]


def test_ragtimes_ratios_are_taken_run_by_run() -> None:
    got = {r.name: r.spread for r in ratios(RUNS, ["haystack"], [1])}
    cpu = got["cpu_ms_per_request, 1 user, ragtime / haystack"]
    assert cpu is not None and cpu.values == [round(v / 30, 4) for v in (13, 14, 15)]
    ceiling = got["ceiling, ragtime / haystack"]
    assert ceiling is not None and ceiling.median == 2.04


def test_a_load_without_cpu_readings_has_no_cpu_figure() -> None:
    from bench.harness.client import RequestRecord
    from bench.harness.results import Run, summarize_run

    records = [RequestRecord(target="floor", index=0, scheduled_s=0, start_lag_ms=0, status=200,
                             outcome="ok", ttft_ms=5.0, e2e_ms=6.0, prompt_tokens=40)]  # fmt: skip
    run = Run(target="floor", load="1 user", mode="closed", users=1, wall_s=1.0,
              summary=summarize_run(records, 1.0), requests=records)  # fmt: skip
    got = target_load(run, None, 1)
    assert got.cpu_ms_per_request is None and got.ttft_p50_ms == 5.0
    assert got.prompt_tokens_mean == 40.0
    assert target_load(run, 0.02, 4).cpu_ms_per_request == 5.0


def test_without_the_extra_the_command_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(command.importlib.util, "find_spec", lambda name: None)
    args = argparse.Namespace(no_peer=False, peer_python=sys.executable, peer_generator=None,
                              index_cache=Path("x"))  # fmt: skip
    with pytest.raises(ValueError, match=r"pip install -e '\.\[bench-peers\]'"):
        command._peer(args, null=True)
    args.no_peer = True
    assert command._peer(args, null=True) is None


def test_the_peers_sweep_asks_each_step_fresh_questions_the_same_for_every_target(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The ceiling's sweep with a body file per step: every question new, each endpoint of a
    step sent the same file; a target leaves as the ceiling's rule says."""
    from bench.suites.ceiling import measure as ceiling_measure
    from bench.suites.ceiling.measure import Endpoint
    from bench.suites.peers.measure import fresh_sweep

    p99s = {"a": {10: 5.0, 20: 5.0, 40: 50.0}, "b": {10: 5.0, 20: 50.0}}
    sent: dict[tuple[str, float], list[str]] = {}

    def fake(name: str, url: str, **kw: object) -> WrkPhase:
        rate = float(kw["rate"])  # type: ignore[arg-type]
        sent[(name, rate)] = Path(str(kw["bodies"])).read_text().splitlines()
        p99 = p99s[name][int(rate)]
        return WrkPhase(
            target=name, rate=rate, seconds=2.0, connections=8, sent=20, answered=20, bad=0,
            transport_errors=0, timeouts=0, late=0, late_ms_max=0.0,
            latency_ms=LatencyMs(n=20, p50=p99 / 2, p99=p99), error_ratio=0.0, answered_rps=10.0,
        )  # fmt: skip

    monkeypatch.setattr(ceiling_measure, "run_wrk", fake)
    said: list[str] = []
    phases = fresh_sweep(
        [Endpoint("a", "u1"), Endpoint("b", "u2")], ["What is a tuple?"], [10, 20, 40, 80],
        run=2, work_dir=tmp_path, seconds=1, min_requests=10, factor=2, patience=1, pause_s=0,
        say=said.append,
    )  # fmt: skip
    assert [(p.target, p.rate) for p in phases] == [
        ("a", 10), ("b", 10), ("b", 20), ("a", 20), ("a", 40)
    ]  # fmt: skip
    for rate in (10, 20):
        assert sent[("a", rate)] == sent[("b", rate)]
    bodies = [line for (name, _), lines in sent.items() if name == "a" for line in lines]
    assert len(bodies) == len(set(bodies))  # no question asked twice, across steps
    assert "CPU None ms/response" in said[0]
