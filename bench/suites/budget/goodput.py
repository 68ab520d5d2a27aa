"""``ragtime bench budget --budgets ...``: goodput, what users get within each budget.

For each server (a config file; the fake SGLang server is started first when asked), in order:

1. **baseline**: ``baseline`` requests at 1 user with a budget nothing constrains; their median
   end-to-end time is the unconstrained p50, and the server's own cost model
   (``GET /v1/budget/model``) gives the smallest plan's predicted cost;
2. **before**: for each budget (a multiple of that p50) and each load (closed loops of N users),
   ``requests`` requests on a question mix with repeats (``repeat_mix``);
3. **cache hits**: ``cache_hits`` requests of one question, so that its prompt is served from the
   prefix cache again and again (what poisoned the first cost model);
4. **after**: the cells of step 2 again.

Each request counts as **within** when its response came back within its budget (a complete
answer the server did not mark over budget, or a 504: the budget held either way), **useful**
(a complete answer of at least ``USEFUL_WORDS`` words within budget, ``bench.harness.outcomes``:
the headline), a **504** (refused: within budget, but not useful however fast), over budget, or
an error. Targets: at least 99% within in every cell; at least 95% useful wherever the smallest
plan's measured cost fits the budget; no budget and load with fewer useful answers after the
cache hits than before.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from bench.harness.client import RequestRecord
from bench.harness.outcomes import is_refused, is_useful, is_within
from bench.harness.results import RunHeader
from bench.harness.stats import Summary, summarize

SCHEMA_VERSION = "ragtime-bench-goodput/1"
TARGET_WITHIN = 0.99
TARGET_USEFUL = 0.95
Phase = Literal["before", "after_cache_hits"]


def repeat_mix(questions: Sequence[str], n: int, *, repeat_share: float, seed: int) -> list[str]:
    """``n`` questions in which about ``repeat_share`` repeat one of the last few asked."""
    rng = random.Random(seed)
    fresh = list(questions)
    rng.shuffle(fresh)
    out: list[str] = []
    i = 0
    while len(out) < n:
        if out and rng.random() < repeat_share:
            out.append(rng.choice(out[-4:]))
        else:
            out.append(fresh[i % len(fresh)])
            i += 1
    return out


class GoodputCell(BaseModel):
    server: str
    phase: Phase
    multiple: float = Field(description="The budget as a multiple of the unconstrained p50.")
    budget_ms: int
    users: int
    requests: int
    within: int
    useful: int
    refused: int = Field(description="504s.")
    over_budget: int
    errors: int
    within_ratio: float
    useful_ratio: float
    refused_ratio: float
    smallest_plan_fits: bool = Field(
        description="The smallest plan's measured (predicted at p90) cost fits the budget."
    )
    ttft_ms: Summary
    e2e_ms: Summary
    answer_words: Summary
    degradations: dict[str, int]


class ServerBaseline(BaseModel):
    server: str
    config: dict[str, str]
    unconstrained_p50_ms: float
    baseline: Summary
    plan_bounds: dict[str, float] = Field(
        description="The server's predicted smallest and full plan (ms), after the baseline."
    )
    cost_model: dict[str, Any]
    cost_model_after: dict[str, Any] = Field(default_factory=dict)


class GoodputResult(RunHeader):
    schema_version: Literal["ragtime-bench-goodput/1"] = "ragtime-bench-goodput/1"
    multiples: list[float]
    repeat_share: float
    cache_hits: int
    servers: list[ServerBaseline]
    cells: list[GoodputCell]
    notes: list[str] = Field(default_factory=list)


def summarize_cell(
    records: Sequence[RequestRecord],
    *,
    server: str,
    phase: Phase,
    multiple: float,
    budget_ms: int,
    users: int,
    smallest_ms: float,
) -> GoodputCell:
    n = len(records)
    within = sum(1 for r in records if is_within(r))
    useful = sum(1 for r in records if is_useful(r))
    refused = sum(1 for r in records if is_refused(r))
    late = sum(
        1 for r in records if not is_within(r) and r.e2e_ms is not None and r.e2e_ms > budget_ms
    )
    errors = n - within - refused - late

    def share(count: int) -> float:
        return round(count / n, 4) if n else 0.0

    ok = [r for r in records if r.outcome == "ok"]
    return GoodputCell(
        server=server,
        phase=phase,
        multiple=multiple,
        budget_ms=budget_ms,
        users=users,
        requests=n,
        within=within,
        useful=useful,
        refused=refused,
        over_budget=late,
        errors=max(errors, 0),
        within_ratio=share(within),
        useful_ratio=share(useful),
        refused_ratio=share(refused),
        smallest_plan_fits=smallest_ms <= budget_ms,
        ttft_ms=summarize(r.ttft_ms for r in ok if r.ttft_ms is not None),
        e2e_ms=summarize(r.e2e_ms for r in records if r.e2e_ms is not None),
        answer_words=summarize(float(r.answer_words) for r in ok),
        degradations=dict(sorted(Counter(d for r in ok for d in r.degradations).items())),
    )


def verdicts(result: GoodputResult) -> dict[str, bool]:
    """The three targets, each met or not."""
    cells = result.cells
    within = all(c.within_ratio >= TARGET_WITHIN for c in cells)
    useful = all(c.useful_ratio >= TARGET_USEFUL for c in cells if c.smallest_plan_fits)
    before = {(c.server, c.multiple, c.users): c for c in cells if c.phase == "before"}
    no_worse = all(
        c.useful >= before[(c.server, c.multiple, c.users)].useful
        for c in cells
        if c.phase == "after_cache_hits" and (c.server, c.multiple, c.users) in before
    )
    return {
        "within_99": within,
        "useful_95_where_feasible": useful,
        "no_worse_after_hits": no_worse,
    }


def table(cells: Sequence[GoodputCell]) -> str:
    rows = [
        "| server | phase | budget (x p50) | users | n | within | **useful** | 504 | over / errors "
        "| smallest plan fits | TTFT p50 ms | e2e p50 / p95 ms | words p50 | degradations |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cells:
        mix = ", ".join(f"{k} {v}" for k, v in c.degradations.items()) or "none"
        rows.append(
            f"| {c.server} | {c.phase.replace('_', ' ')} | {c.budget_ms} ms ({c.multiple:g}x) "
            f"| {c.users} | {c.requests} | {c.within_ratio:.0%} | **{c.useful_ratio:.0%}** "
            f"| {c.refused_ratio:.0%} | {c.over_budget} / {c.errors} "
            f"| {'yes' if c.smallest_plan_fits else 'no'} | {c.ttft_ms.fmt('p50', 0)} "
            f"| {c.e2e_ms.fmt('p50', 0)} / {c.e2e_ms.fmt('p95', 0)} "
            f"| {c.answer_words.fmt('p50', 0)} | {mix} |"
        )
    return "\n".join(rows)


def text_report(result: GoodputResult) -> str:
    lines = []
    for s in result.servers:
        lines.append(
            f"{s.server}: unconstrained p50 {s.unconstrained_p50_ms:.0f} ms; the server's model "
            f"predicts the smallest plan at {s.plan_bounds.get('smallest_ms', 0):.0f} ms and the "
            f"full plan at {s.plan_bounds.get('full_ms', 0):.0f} ms."
        )
    met = verdicts(result)
    lines.append(
        "Targets: "
        + "; ".join(
            f"{name.replace('_', ' ')}: {'met' if ok else 'NOT met'}" for name, ok in met.items()
        )
        + "."
    )
    return table(result.cells) + "\n\n" + "\n".join(lines)


def run_goodput(
    *,
    servers: Sequence[tuple[str, Path]],
    questions: Sequence[str],
    multiples: Sequence[float],
    users: Sequence[int],
    requests: int,
    baseline: int,
    cache_hits: int,
    repeat_share: float,
    timeout_s: float,
    log_dir: Path,
    command: str,
    fake_sglang: str | None = None,
    show_progress: bool = True,
) -> GoodputResult:
    """Every server in turn: baseline, cells, cache hits, cells again."""
    import asyncio
    import sys
    from contextlib import ExitStack

    import httpx

    from bench.harness.client import Target
    from bench.harness.record import machine_info, now_iso, versions
    from bench.harness.runner import LoadSpec, measure
    from bench.harness.serve import config_key, ragtime_server, read_config
    from bench.sglang_sim.process import with_simulated_sglang

    def say(text: str) -> None:
        if show_progress:
            print(text, file=sys.stderr, flush=True)

    def run(target: Target, qs: Sequence[str], n_users: int, n: int, budget: int) -> list[Any]:
        spec = LoadSpec(users=n_users, requests=n, budget_ms=budget, timeout_s=timeout_s)
        (got,) = asyncio.run(measure([target], qs, spec, show_progress=show_progress))
        return list(got.requests)

    def cost_model(target: Target) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {target.key}"} if target.key else {}
        response = httpx.get(f"{target.url}/v1/budget/model", headers=headers, timeout=10)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    machine, created = machine_info(), now_iso()
    baselines: list[ServerBaseline] = []
    cells: list[GoodputCell] = []
    mix = repeat_mix(questions, 400, repeat_share=repeat_share, seed=7)
    generous = 60_000
    for name, path in servers:
        config = read_config(path)
        with ExitStack() as stack:
            config = with_simulated_sglang(stack, config, fake_sglang, log_dir=log_dir, name=name)
            say(f"starting {name} ...")
            server = stack.enter_context(ragtime_server(name, config, log_dir=log_dir))
            target = Target(name, server.url, config_key(config))
            run(target, mix[-2:], 1, 2, generous)  # warm-up: load, first prefix
            base = run(target, mix, 1, baseline, generous)
            p50 = summarize(r.e2e_ms for r in base if r.outcome == "ok").p50 or 1000.0
            model = cost_model(target)
            plans: dict[str, dict[str, float]] = model.get("plans", {})
            bounds = next(iter(plans.values()), {"smallest_ms": 0.0, "full_ms": 0.0})
            say(f"{name}: unconstrained p50 {p50:.0f} ms; plans {bounds}")
            info = ServerBaseline(
                server=name,
                config=config,
                unconstrained_p50_ms=round(p50, 1),
                baseline=summarize(r.e2e_ms for r in base if r.e2e_ms is not None),
                plan_bounds=bounds,
                cost_model=model,
            )
            phases: tuple[Phase, ...] = ("before", "after_cache_hits")
            for phase in phases:
                if phase == "after_cache_hits":
                    say(f"{name}: {cache_hits} cache-hit requests of one question")
                    run(target, [mix[0]], min(max(users), 8), cache_hits, generous)
                for multiple in multiples:
                    budget = max(round(multiple * p50), 50)
                    for n_users in users:
                        got = run(target, mix, n_users, requests, budget)
                        cell = summarize_cell(
                            got, server=name, phase=phase, multiple=multiple,
                            budget_ms=budget, users=n_users, smallest_ms=bounds["smallest_ms"],
                        )  # fmt: skip
                        cells.append(cell)
                        say(table([cell]).splitlines()[-1])
            info.cost_model_after = cost_model(target)
            baselines.append(info)
    return GoodputResult(
        created=created,
        command=command,
        machine=machine,
        versions=versions(),
        multiples=list(multiples),
        repeat_share=repeat_share,
        cache_hits=cache_hits,
        servers=baselines,
        cells=cells,
    )


def read_goodput_json(path: Path) -> GoodputResult:
    return GoodputResult.model_validate_json(path.read_text())
