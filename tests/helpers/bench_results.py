"""Builders of the bench's results for tests: request records, runs, whole result files."""

from __future__ import annotations

from pathlib import Path

from bench.harness.client import RequestRecord
from bench.harness.results import BenchResult, Run, TargetInfo, compare, find_ceiling, summarize_run


def record(i: int, *, target: str = "a", ttft: float = 10.0, outcome: str = "ok") -> RequestRecord:
    """Request ``i`` of ``target``: if ``outcome="ok"``, answered in ``ttft`` + 20 of 25 ms."""
    ok = outcome == "ok"
    return RequestRecord(
        target=target,
        index=i,
        scheduled_s=i * 0.1,
        start_lag_ms=0.1,
        status=200 if outcome != "http_error" else 503,
        outcome=outcome,
        ttft_ms=ttft if ok else None,
        e2e_ms=ttft + 20.0 if ok else None,
        tokens=3 if ok else 0,
        itl_ms=[1.0, 3.0] if ok else [],
        budget_ms=25.0,
        within_budget=ok and ttft + 20.0 <= 25.0,
        budget_exceeded=(ttft + 20.0 > 25.0) if ok else None,
        degradations=["rerank_skipped"] if ok else [],
        timings_ms={"embed": 4.0, "generate": 6.0} if ok else {},
    )


def make_run(target: str, ttfts: list[float], *, rate: float | None = None, errors: int = 0) -> Run:
    """A run of one answered request per TTFT in ``ttfts``, then ``errors`` failed ones."""
    records = [record(i, target=target, ttft=t) for i, t in enumerate(ttfts)]
    records += [record(len(ttfts) + i, target=target, outcome="http_error") for i in range(errors)]
    return Run(
        target=target,
        load=f"{rate:g} req/s" if rate else "1 user",
        mode="open" if rate else "closed",
        users=None if rate else 1,
        rate=rate,
        wall_s=2.0,
        summary=summarize_run(records, 2.0, offered_rps=rate),
        requests=records,
    )


def make_result(command: str, runs: list[Run], targets: list[TargetInfo]) -> BenchResult:
    """A result file of ``runs``, with its comparisons and (for rate sweeps) its ceiling."""
    sweeps = [r for r in runs if r.rate is not None]
    return BenchResult(
        created="2026-12-02T00:00:00+00:00",
        command=command,
        machine={"cores": 2, "cpu_model": "AMD EPYC", "loadavg_at_start": [1.0, 1.0, 1.0]},
        versions={"python": "3.11.7", "fastapi": "0.165.0", "commit": "abc1234"},
        targets=targets,
        runs=runs,
        comparisons=compare(runs),
        ceilings=[find_ceiling(sweeps)] if sweeps else [],
    )


def null_config(folder: Path, data_dir: Path, key: str, *, max_tokens: int = 8) -> Path:
    """A bench config (``--serve``) of ragtime on the null backend over ``data_dir``."""
    config = folder / "null.env"
    config.write_text(
        f"RAGTIME_DATA_DIR={data_dir}\nRAGTIME_GENERATION_BACKEND=null\n"
        f"RAGTIME_MAX_OUTPUT_TOKENS={max_tokens}\nRAGTIME_API_KEY={key}\n"
    )
    return config
