"""``ragtime bench budget``: the degradation policy on and off, under injected faults.

For each fault (a delay per reranked pair, ``RAGTIME_FAULT_RERANK_DELAY_MS``, or per generated
token, ``RAGTIME_FAULT_GENERATE_TOKEN_DELAY_MS``) two servers start from the same config file,
``RAGTIME_DEGRADATION_POLICY=true`` and ``false``, with a tiny random cross-encoder
(``bench.harness.tiny_cross_encoder``) so that the rerank stage runs. Both are driven by the
ordinary harness (``bench.harness.runner.measure``: warm-up, then rounds alternating between them)
with the same per-request budget, at each load (closed loops of N users). Every request is
classified:

- ``answered_within``: HTTP 200, a ``done`` event, and the server's ``budget.exceeded`` false;
- ``failed_fast``: a 504 (or ``deadline_exceeded`` error event) within the budget: not answered,
  but the client was told in time;
- ``over_budget``: answered, or failed, after the budget ran out;
- ``error``: any other failure.

``BudgetResult`` (``schema_version`` ``ragtime-bench-budget/1``) is the ``--json`` file; it
keeps every run, with its per-request records, beside the per-cell summaries, and the
machinery's own cost (``bench.suites.machinery.cost``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from bench.harness.client import RequestRecord
from bench.harness.results import Run, RunHeader, TargetInfo
from bench.harness.stats import Summary, summarize
from bench.suites.machinery.cost import MachineryCost, machinery_line

SCHEMA_VERSION = "ragtime-bench-budget/1"
TARGET_WITHIN_BUDGET = 0.99
Verdict = Literal["answered_within", "failed_fast", "over_budget", "error"]
FAULT_VARIABLES = {
    "rerank": "RAGTIME_FAULT_RERANK_DELAY_MS",
    "generate": "RAGTIME_FAULT_GENERATE_TOKEN_DELAY_MS",
}


def classify(record: RequestRecord) -> Verdict:
    """Which of the four outcomes a request had (see the module docstring)."""
    late = (
        record.budget_ms is not None
        and record.e2e_ms is not None
        and record.e2e_ms > record.budget_ms
    )
    if record.outcome == "ok" and record.status == 200:
        exceeded = record.budget_exceeded if record.budget_exceeded is not None else late
        return "over_budget" if exceeded else "answered_within"
    deadline = record.status == 504 or "deadline_exceeded" in (record.error or "")
    if deadline:
        return "over_budget" if late else "failed_fast"
    if record.outcome == "timeout" or late:
        return "over_budget"
    return "error"


class BudgetCell(BaseModel):
    """One fault, one policy setting, one load: how its requests fared against the budget."""

    fault: str
    fault_ms: float = Field(description="The injected delay (per run of rerank, per token).")
    policy: bool
    target: str
    load: str
    users: int | None
    budget_ms: float | None
    requests: int
    answered_within: int
    failed_fast: int
    over_budget: int
    errors: int
    answered_within_ratio: float = Field(description="Answered in full within the budget.")
    failed_fast_ratio: float
    over_budget_ratio: float
    error_ratio: float
    ttft_ms: Summary = Field(description="Of the answered.")
    e2e_ms: Summary = Field(description="Of the answered.")
    e2e_all_ms: Summary = Field(description="Of every request, failures included.")
    degradations: dict[str, int] = Field(description="Actions in the answers' degradations.")
    degraded_requests: int = Field(description="Answered requests with at least one action.")
    finish_reasons: dict[str, int]
    statuses: dict[str, int]


def summarize_cell(
    run: Run, *, fault: str, fault_ms: float, policy: bool, budget_ms: float | None
) -> BudgetCell:
    records = run.requests
    n = len(records)
    verdicts = Counter(classify(r) for r in records)
    answered = [r for r in records if r.outcome == "ok"]

    def share(count: int) -> float:
        return round(count / n, 4) if n else 0.0

    return BudgetCell(
        fault=fault,
        fault_ms=fault_ms,
        policy=policy,
        target=run.target,
        load=run.load,
        users=run.users,
        budget_ms=budget_ms,
        requests=n,
        answered_within=verdicts["answered_within"],
        failed_fast=verdicts["failed_fast"],
        over_budget=verdicts["over_budget"],
        errors=verdicts["error"],
        answered_within_ratio=share(verdicts["answered_within"]),
        failed_fast_ratio=share(verdicts["failed_fast"]),
        over_budget_ratio=share(verdicts["over_budget"]),
        error_ratio=share(verdicts["error"]),
        ttft_ms=summarize(r.ttft_ms for r in answered if r.ttft_ms is not None),
        e2e_ms=summarize(r.e2e_ms for r in answered if r.e2e_ms is not None),
        e2e_all_ms=summarize(r.e2e_ms for r in records if r.e2e_ms is not None),
        degradations=_count(d for r in answered for d in r.degradations),
        degraded_requests=sum(1 for r in answered if r.degradations),
        finish_reasons=_count(r.finish_reason or "none" for r in answered),
        statuses=_count(str(r.status) for r in records),
    )


def _count(items: Any) -> dict[str, int]:
    return dict(sorted(Counter(items).items()))


class FaultRuns(BaseModel):
    """The runs of one fault: both policy settings at every load."""

    fault: str
    variable: str
    fault_ms: float
    targets: list[TargetInfo]
    runs: list[Run]


class BudgetResult(RunHeader):
    schema_version: Literal["ragtime-bench-budget/1"] = "ragtime-bench-budget/1"
    budget_ms: int
    config_path: str
    config: dict[str, str]
    loads: list[str] = Field(description="What 1x and 2x load mean here.")
    cells: list[BudgetCell]
    faults: list[FaultRuns]
    machinery: MachineryCost | None = None
    target_within_budget: float = TARGET_WITHIN_BUDGET
    notes: list[str] = Field(default_factory=list)


def policy_met(cells: Sequence[BudgetCell]) -> bool:
    """Whether every policy-on cell answered at least the target share within budget."""
    on = [c for c in cells if c.policy]
    return bool(on) and all(c.answered_within_ratio >= TARGET_WITHIN_BUDGET for c in on)


def cells_table(cells: Sequence[BudgetCell]) -> str:
    """Markdown: one row per cell."""
    rows = [
        "| fault | policy | load | n | answered within budget | 504 within budget "
        "| over budget | errors | TTFT p50 / p95 / p99 ms (n) | e2e p50 / p95 / p99 ms (n) "
        "| degradations (actions; requests degraded) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cells:
        mix = ", ".join(f"{k} {v}" for k, v in c.degradations.items()) or "none"
        ttft = " / ".join(c.ttft_ms.fmt(f, 0) for f in ("p50", "p95", "p99"))
        e2e = " / ".join(c.e2e_ms.fmt(f, 0) for f in ("p50", "p95", "p99"))
        rows.append(
            f"| {c.fault} +{c.fault_ms:g} ms | {'on' if c.policy else 'off'} | {c.load} "
            f"| {c.requests} | {c.answered_within} ({c.answered_within_ratio:.0%}) "
            f"| {c.failed_fast} ({c.failed_fast_ratio:.0%}) "
            f"| {c.over_budget} ({c.over_budget_ratio:.0%}) | {c.errors} "
            f"| {ttft} ({c.ttft_ms.n}) | {e2e} ({c.e2e_ms.n}) "
            f"| {mix}; {c.degraded_requests} of {c.ttft_ms.n if c.ttft_ms.n else 0} |"
        )
    return "\n".join(rows)


def findings(result: BudgetResult) -> list[str]:
    """Figures computed from the records that a reader of the table would ask for next."""
    lines: list[str] = []
    failed = [
        r.e2e_ms
        for f in result.faults
        for run in f.runs
        for r in run.requests
        if classify(r) == "failed_fast" and r.e2e_ms is not None
    ]
    if failed:
        lines.append(
            f"The {len(failed)} requests that failed within budget got their 504 after "
            f"{min(failed):.0f} to {max(failed):.0f} ms of their {result.budget_ms} ms: at the "
            "deadline (no answer token came before it), not early from the plan."
        )
    on_cells = [c for c in result.cells if c.policy]
    answered = sum(c.ttft_ms.n for c in on_cells)
    planned = sum(
        1
        for f in result.faults
        for run in f.runs
        if any(c.policy and c.target == run.target for c in on_cells)
        for r in run.requests
        if r.outcome == "ok" and any(d != "deadline_stop" for d in r.degradations)
    )
    lines.append(
        f"With the policy on, {planned} of {answered} answered requests carried an action "
        "planned by the policy (anything but `deadline_stop`, which the deadline imposes with "
        "the policy on or off)."
    )
    over = [
        r.e2e_ms - result.budget_ms
        for f in result.faults
        for run in f.runs
        for r in run.requests
        if classify(r) == "over_budget" and r.outcome == "ok" and r.e2e_ms is not None
    ]
    if over:
        lines.append(
            f"The {len(over)} answers over budget overran it by {min(over):.0f} to "
            f"{max(over):.0f} ms (client clock), after `deadline_stop`."
        )
    return lines


def text_report(result: BudgetResult) -> str:
    parts = [cells_table(result.cells), " ".join(findings(result))]
    if result.machinery is not None:
        parts.append(machinery_line(result.machinery) + ".")
    met = "met" if policy_met(result.cells) else "NOT met"
    parts.append(
        f"Target: at least {TARGET_WITHIN_BUDGET:.0%} answered within budget with the policy on, "
        f"under every fault and load: {met}."
    )
    return "\n\n".join(parts)


def run_budget_bench(
    *,
    config_path: Path,
    questions: Sequence[str],
    budget_ms: int,
    faults: Sequence[tuple[str, float]],
    users: Sequence[int],
    requests: int,
    warmup: int,
    rounds: int,
    timeout_s: float,
    model_dir: Path,
    log_dir: Path,
    machinery_iterations: int,
    command: str,
    show_progress: bool = True,
) -> BudgetResult:
    """Measure the machinery, build the cross-encoder, then each fault with policy on and off."""
    import asyncio
    import os
    import sys
    from contextlib import ExitStack

    from bench.harness.client import Target
    from bench.harness.record import machine_info, now_iso, versions
    from bench.harness.runner import LoadSpec, measure
    from bench.harness.serve import config_key, ragtime_server, read_config
    from bench.harness.tiny_cross_encoder import build_tiny_cross_encoder
    from bench.suites.machinery.cost import measure_machinery

    def say(text: str) -> None:
        if show_progress:
            print(text, file=sys.stderr, flush=True)

    machine, created = machine_info(), now_iso()
    # First, while nothing else runs: the machinery's own cost, in this process.
    machinery = measure_machinery(machinery_iterations) if machinery_iterations else None
    if machinery is not None:
        say(machinery_line(machinery))
    base = read_config(config_path)
    reranker = build_tiny_cross_encoder(model_dir)
    say(f"built the tiny cross-encoder in {reranker}")
    cells: list[BudgetCell] = []
    fault_runs: list[FaultRuns] = []
    for fault, fault_ms in faults:
        variable = FAULT_VARIABLES[fault]
        targets: list[Target] = []
        infos: list[TargetInfo] = []
        policies: dict[str, bool] = {}
        with ExitStack() as stack:
            for policy in (True, False):
                name = f"{fault}-fault-policy-{'on' if policy else 'off'}"
                config = {
                    **base,
                    "RAGTIME_RERANKER_MODEL": str(reranker),
                    "RAGTIME_DEGRADATION_POLICY": "true" if policy else "false",
                    variable: f"{fault_ms:g}",
                }
                say(f"starting {name} ...")
                server = stack.enter_context(ragtime_server(name, config, log_dir=log_dir))
                targets.append(Target(name, server.url, config_key(config)))
                infos.append(
                    TargetInfo(name=name, url=server.url, kind="ragtime",
                               config_path=str(config_path), config=config)
                )  # fmt: skip
                policies[name] = policy
            runs: list[Run] = []
            for n_users in users:
                spec = LoadSpec(
                    users=n_users, requests=requests, warmup=warmup, budget_ms=budget_ms,
                    rounds=rounds, timeout_s=timeout_s,
                )  # fmt: skip
                got = asyncio.run(measure(targets, questions, spec, show_progress=show_progress))
                runs += got
                for run in got:
                    cell = summarize_cell(
                        run, fault=fault, fault_ms=fault_ms, policy=policies[run.target],
                        budget_ms=budget_ms,
                    )  # fmt: skip
                    cells.append(cell)
                    say(cells_table([cell]).splitlines()[-1])
        fault_runs.append(
            FaultRuns(fault=fault, variable=variable, fault_ms=fault_ms, targets=infos, runs=runs)
        )
    if hasattr(os, "getloadavg"):
        machine["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return BudgetResult(
        created=created,
        command=command,
        machine=machine,
        versions=versions(),
        budget_ms=budget_ms,
        config_path=str(config_path),
        config=base,
        loads=[f"{u}x: a closed loop of {u} user{'s' if u > 1 else ''}" for u in users],
        cells=cells,
        faults=fault_runs,
        machinery=machinery,
    )


def write_budget_json(result: BudgetResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.model_dump_json(indent=1) + "\n")


def read_budget_json(path: Path) -> BudgetResult:
    return BudgetResult.model_validate_json(path.read_text())
