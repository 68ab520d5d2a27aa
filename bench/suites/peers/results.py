"""What ``ragtime bench peers`` finds: each target's first token, whole response, rate and CPU per
request under closed loops of users (the bench's own client, questions never asked before), and
its ceiling by wrk (open loops of fresh questions, ``bench.suites.ceiling``'s rule), run after
run; across runs, the median and spread of each figure and of ragtime's ratios to the others.
``PeersBench`` (``schema_version`` ``ragtime-bench-peers/1``) is the ``--json`` file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from bench.harness.results import RunHeader
from bench.suites.ceiling.results import Spread, Sweep, Workers, spread

SCHEMA_VERSION = "ragtime-bench-peers/1"
RAGTIME, FLOOR, PEER = "ragtime", "floor-same-work", "haystack"


class TargetLoad(BaseModel):
    """One target under one closed loop of one run."""

    target: str
    users: int
    requests: int = Field(description="Measured requests (warm-up left out).")
    errors: int
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    e2e_p50_ms: float | None
    throughput_rps: float = Field(description="Answers in full per wall second of its turns.")
    cpu_ms_per_request: float | None = Field(
        description="CPU its server's processes used over the load, warm-up included, per "
        "request sent (Linux /proc): what one request costs it at this load."
    )
    prompt_tokens_mean: float | None = Field(
        description="Prompt tokens per answer as its server reports them (ragtime's and the "
        "floor's in its backend's tokenizer, the null one in words; Haystack's mock counts words)."
    )


def target_load(run: Any, cpu_s: float | None, sent: int) -> TargetLoad:
    """The figures of one ``bench.harness.results.Run``; ``cpu_s`` its server's CPU seconds."""
    s = run.summary
    prompts = [r.prompt_tokens for r in run.requests if r.outcome == "ok" and r.prompt_tokens]
    return TargetLoad(
        target=run.target,
        users=run.users or 0,
        requests=s.requests,
        errors=s.errors,
        ttft_p50_ms=s.ttft_ms.p50,
        ttft_p95_ms=s.ttft_ms.p95,
        e2e_p50_ms=s.e2e_ms.p50,
        throughput_rps=s.throughput_rps,
        cpu_ms_per_request=None if cpu_s is None or not sent else round(cpu_s * 1000 / sent, 3),
        prompt_tokens_mean=round(sum(prompts) / len(prompts), 1) if prompts else None,
    )


class PeersRun(BaseModel):
    number: int
    loads: list[TargetLoad]
    sweeps: list[Sweep] = Field(default_factory=list)
    loadavg: list[list[float]] = Field(
        default_factory=list, description="Load average (1, 5, 15 min) at its start and end."
    )


class Figure(BaseModel):
    """One target's figure across runs."""

    target: str
    users: int | None = Field(description="The closed loop's users; None for the ceiling.")
    measure: Literal["ttft_p50_ms", "e2e_p50_ms", "throughput_rps", "cpu_ms_per_request",
                     "ceiling_rps", "ceiling_cpu_ms", "peak_rps"]  # fmt: skip
    spread: Spread | None


class Ratio(BaseModel):
    """ragtime's figure over another target's, run by run."""

    name: str
    spread: Spread | None


class PeersBench(RunHeader):
    schema_version: Literal["ragtime-bench-peers/1"] = "ragtime-bench-peers/1"
    config_path: str
    config: dict[str, str]
    workers: Workers
    tokens: int = Field(description="Tokens each answer streams (null generation) or its cap.")
    peer: dict[str, str] = Field(description="How the peer was built and run.")
    users: list[int]
    requests: int
    warmup: int
    rates: list[float]
    seconds: float
    runs: list[PeersRun]
    figures: list[Figure]
    ratios: list[Ratio]
    notes: list[str] = Field(default_factory=list)


def _ceiling_cpu(sweep: Sweep) -> float | None:
    """The server's CPU per response at its ceiling's rate (the phase it held last)."""
    rate = sweep.ceiling.ceiling_rps
    return next((p.server_cpu_ms for p in sweep.phases if p.rate == rate), None)


def _values(runs: Sequence[PeersRun], target: str, users: int | None, measure: str) -> list[Any]:
    if users is None:
        sweeps = [s for r in runs for s in r.sweeps if s.target == target]
        if measure == "ceiling_rps":
            return [s.ceiling.ceiling_rps for s in sweeps]
        if measure == "peak_rps":
            return [max((p.answered_rps for p in s.phases), default=None) for s in sweeps]
        return [_ceiling_cpu(s) for s in sweeps]
    return [
        getattr(load, measure)
        for r in runs
        for load in r.loads
        if load.target == target and load.users == users
    ]


def figures(runs: Sequence[PeersRun], targets: Sequence[str], users: Sequence[int]) -> list[Figure]:
    """Each target's figures across runs: per closed loop, then its ceiling (when swept)."""
    closed = ("ttft_p50_ms", "e2e_p50_ms", "throughput_rps", "cpu_ms_per_request")
    out = [
        Figure(target=t, users=u, measure=m, spread=spread(_values(runs, t, u, m)))
        for u in users
        for t in targets
        for m in closed
    ]
    if any(r.sweeps for r in runs):
        out += [
            Figure(target=t, users=None, measure=m, spread=spread(_values(runs, t, None, m)))
            for t in targets
            for m in ("ceiling_rps", "ceiling_cpu_ms", "peak_rps")
        ]
    return out


def _ratio(ours: Sequence[Any], theirs: Sequence[Any]) -> list[float | None]:
    return [
        round(a / b, 4) if a is not None and b else None for a, b in zip(ours, theirs, strict=False)
    ]


def ratios(runs: Sequence[PeersRun], others: Sequence[str], users: Sequence[int]) -> list[Ratio]:
    """ragtime's CPU per request and TTFT p50 over each other target's (per closed loop), and
    its ceiling over theirs, run by run."""
    out = []
    for other in others:
        for u in users:
            for measure in ("cpu_ms_per_request", "ttft_p50_ms"):
                ours, theirs = _values(runs, RAGTIME, u, measure), _values(runs, other, u, measure)
                out.append(Ratio(name=f"{measure}, {users_label(u)}, ragtime / {other}",
                                 spread=spread(_ratio(ours, theirs))))  # fmt: skip
        if any(r.sweeps for r in runs):
            ours, theirs = (_values(runs, t, None, "ceiling_rps") for t in (RAGTIME, other))
            out.append(Ratio(name=f"ceiling, ragtime / {other}",
                             spread=spread(_ratio(ours, theirs))))  # fmt: skip
    return out


def users_label(users: int) -> str:
    return f"{users} user" + ("s" if users != 1 else "")


def _cell(value: Spread | None, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if len(value.values) == 1:
        return f"{value.median:.{digits}f}"
    return f"{value.median:.{digits}f} ({value.min:.{digits}f}-{value.max:.{digits}f})"


def text_report(bench: PeersBench) -> str:
    """The medians (and ranges) across runs, a line per target and load."""
    targets = list(dict.fromkeys(f.target for f in bench.figures))
    lines = [
        f"{len(bench.runs)} run(s); ragtime with {bench.workers.resolved} processes on "
        f"{bench.workers.cores} cores; {bench.tokens} tokens an answer; peer: "
        + ", ".join(f"{k} {v}" for k, v in bench.peer.items())
    ]
    for users in [*bench.users, None]:
        rows = [f for f in bench.figures if f.users == users]
        if not rows:
            continue
        lines.append(f"{users_label(users)}, fresh questions:" if users else "ceiling by wrk:")
        for target in targets:
            got = {f.measure: f.spread for f in rows if f.target == target}
            lines.append(f"  {target:>16}: " + "; ".join(f"{m} {_cell(v)}" for m, v in got.items()))
    lines += [f"{r.name}: {_cell(r.spread, 2)}" for r in bench.ratios]
    lines += bench.notes
    return "\n".join(lines)


def write_peers_json(bench: PeersBench, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(bench.model_dump_json(indent=1) + "\n")
