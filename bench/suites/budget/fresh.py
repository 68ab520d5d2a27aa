"""``ragtime bench budget --fresh-starts N``: what a brand-new server gives its first requests.

For each start (``N`` per config file; the configs take turns, A B, then B A, ...), a new
``ragtime serve`` process starts from the config (``bench.harness.serve``; a config that
generates with SGLang gets a simulated SGLang server of its own, ``bench.sglang_sim``, when
``--fake-sglang`` is given: an empty prefix cache each start). As soon as its ``/readyz``
answers 200 its first requests go out, one after another (a closed loop of one user, no
warm-up), each with the same ``budget_ms``, on the bench's questions in ``FRESH_ORDER``
(1-based numbers into the question file, with repeats as real traffic has them). Each request
is judged as the goodput bench judges it (``bench.harness.outcomes``): **useful** (HTTP 200, an
answer of at least ``USEFUL_WORDS`` words, within budget), **within** (an answer or a 504
within budget), **504** (refused), or another status. A server's row totals its starts, so
that one noisy start does not decide.

``FreshResult`` (``schema_version`` ``ragtime-bench-fresh/1``) is the ``--json`` file; it keeps
every request's record; ``bench.report.fresh_md`` writes its block of BENCHMARKS.md
(``ragtime bench section --fresh``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from bench.harness.client import RequestRecord
from bench.harness.outcomes import is_refused, is_useful, is_within
from bench.harness.results import RunHeader
from bench.harness.stats import Summary, summarize

SCHEMA_VERSION = "ragtime-bench-fresh/1"
#: The first requests of a fresh process: question numbers (1-based) with a few repeats.
FRESH_ORDER = (1, 2, 1, 3, 4, 2, 5, 6, 7, 8)
ROW = "fresh process: first {n} requests at {budget}, useful %"


def fresh_questions(questions: Sequence[str], order: Sequence[int]) -> list[str]:
    """The questions numbered ``order`` (1-based), in that order."""
    if not order:
        raise ValueError("no questions to ask a fresh process")
    wrong = [n for n in order if not 1 <= n <= len(questions)]
    if wrong:
        raise ValueError(f"question numbers {wrong} outside 1..{len(questions)}")
    return [questions[n - 1] for n in order]


class Tally(BaseModel):
    """How a set of requests fared against their budget."""

    requests: int
    useful: int = Field(description="HTTP 200, at least USEFUL_WORDS words, within budget.")
    within: int = Field(description="An answer or a 504 that came back within the budget.")
    answered: int = Field(description="HTTP 200 with a complete answer, useful or not.")
    refused: int = Field(description="504s (or deadline_exceeded error events).")
    other: dict[str, int] = Field(
        description="Neither answered nor refused: by status ('error event' for a 200 whose "
        "stream ended in an error, 'no response' for none)."
    )
    useful_ratio: float
    e2e_ms: Summary = Field(description="Of every response, 504s included.")
    ttft_ms: Summary = Field(description="Of the answered.")


def _other_label(record: RequestRecord) -> str:
    if record.status == 0:
        return "no response"
    if record.status == 200:
        return "error event"
    return str(record.status)


def tally(records: Sequence[RequestRecord]) -> Tally:
    n = len(records)
    answered = [r for r in records if r.outcome == "ok" and r.status == 200]
    refused = [r for r in records if is_refused(r)]
    other = Counter(
        _other_label(r)
        for r in records
        if not is_refused(r) and not (r.outcome == "ok" and r.status == 200)
    )
    useful = sum(1 for r in records if is_useful(r))
    return Tally(
        requests=n,
        useful=useful,
        within=sum(1 for r in records if is_within(r)),
        answered=len(answered),
        refused=len(refused),
        other=dict(sorted(other.items())),
        useful_ratio=round(useful / n, 4) if n else 0.0,
        e2e_ms=summarize(r.e2e_ms for r in records if r.e2e_ms is not None),
        ttft_ms=summarize(r.ttft_ms for r in answered if r.ttft_ms is not None),
    )


def why_not_useful(record: RequestRecord) -> str | None:
    """Why a request was not useful, in a few words (``None`` when it was)."""
    if is_useful(record):
        return None
    e2e = f"{record.e2e_ms:.0f} ms" if record.e2e_ms is not None else "no time"
    if is_refused(record):
        return f"504 after {e2e}"
    if record.outcome == "ok" and record.status == 200:
        if not is_within(record):
            return f"answered late, {e2e}"
        return f"{record.answer_words} word{'s' if record.answer_words != 1 else ''} in {e2e}"
    return f"{_other_label(record)} after {e2e}" + (f" ({record.error})" if record.error else "")


class FreshStart(BaseModel):
    """One brand-new server process and its first requests."""

    server: str
    start: int = Field(description="1-based.")
    ready_s: float = Field(description="From spawning the process to its first /readyz 200.")
    tally: Tally
    records: list[RequestRecord]


class FreshServer(BaseModel):
    """One config file, started afresh ``len(starts)`` times."""

    server: str
    config_path: str
    config: dict[str, str] = Field(description="The last start's (secrets left out).")
    starts: list[FreshStart]
    total: Tally = Field(description="Over every start's requests together.")


class FreshResult(RunHeader):
    schema_version: Literal["ragtime-bench-fresh/1"] = "ragtime-bench-fresh/1"
    budget_ms: int
    order: list[int] = Field(description="Question numbers (1-based) of each start's requests.")
    questions: list[str] = Field(description="The questions asked, in order.")
    servers: list[FreshServer]
    notes: list[str] = Field(default_factory=list)


def fresh_server(
    server: str, config_path: str, config: dict[str, str], starts: Sequence[FreshStart]
) -> FreshServer:
    records = [r for s in starts for r in s.records]
    return FreshServer(
        server=server,
        config_path=config_path,
        config=config,
        starts=list(starts),
        total=tally(records),
    )


def describe(server: FreshServer) -> str:
    """What generated the answers of ``server``, in words."""
    if server.config.get("RAGTIME_SGLANG_ENDPOINTS"):
        return "simulated SGLang server (bench/sglang_sim, GPU-like timings: synthetic)"
    backend = server.config.get("RAGTIME_GENERATION_BACKEND", "llama.cpp")
    if backend == "llama.cpp":
        return "CPU default (SmolLM2-135M through llama.cpp, in-process)"
    return f"{backend} backend"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def _other(t: Tally) -> str:
    return ", ".join(f"{k}: {v}" for k, v in t.other.items()) or "none"


def row_name(result: FreshResult) -> str:
    return ROW.format(n=len(result.order), budget=f"{result.budget_ms / 1000:g} s")


def table(result: FreshResult) -> str:
    """One row per server: the headline row, totals over its starts."""
    rows = [
        "| measure | server | **useful** | useful per start | within budget | 504 "
        "| other statuses | e2e p50 ms (n) | TTFT p50 ms (n) | ready after s, per start |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in result.servers:
        t = s.total
        per = ", ".join(f"{x.tally.useful}/{x.tally.requests}" for x in s.starts)
        ready = ", ".join(f"{x.ready_s:.1f}" for x in s.starts)
        rows.append(
            f"| {row_name(result)} | {s.server}: {describe(s)} "
            f"| **{t.useful_ratio:.0%}** ({t.useful} of {t.requests}) | {per} "
            f"| {t.within} of {t.requests} | {t.refused} | {_other(t)} "
            f"| {_ms(t.e2e_ms.p50)} ({t.e2e_ms.n}) | {_ms(t.ttft_ms.p50)} ({t.ttft_ms.n}) "
            f"| {ready} |"
        )
    return "\n".join(rows)


def starts_table(result: FreshResult) -> str:
    """One row per start, with each request that was not useful and why."""
    rows = [
        "| server | start | ready after s | useful | within | 504 | other | e2e p50 ms "
        "| first request e2e ms | not useful (request number: why) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in result.servers:
        for x in s.starts:
            t = x.tally
            misses = [
                f"{i + 1}: {why}"
                for i, r in enumerate(x.records)
                if (why := why_not_useful(r)) is not None
            ]
            first = x.records[0].e2e_ms if x.records else None
            rows.append(
                f"| {s.server} | {x.start} | {x.ready_s:.1f} | {t.useful}/{t.requests} "
                f"| {t.within} | {t.refused} | {_other(t)} | {_ms(t.e2e_ms.p50)} | {_ms(first)} "
                f"| {'; '.join(misses) or 'none'} |"
            )
    return "\n".join(rows)


def text_report(result: FreshResult) -> str:
    return table(result) + "\n\n" + starts_table(result)


def read_fresh_json(path: Path) -> FreshResult:
    return FreshResult.model_validate_json(path.read_text())


def write_fresh_json(result: FreshResult, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(result.model_dump_json(indent=1) + "\n")


def run_fresh(
    *,
    servers: Sequence[tuple[str, Path]],
    questions: Sequence[str],
    order: Sequence[int],
    budget_ms: int,
    starts: int,
    timeout_s: float,
    log_dir: Path,
    command: str,
    fake_sglang: str | None = None,
    secret_keys: Sequence[str] = ("RAGTIME_API_KEY",),
    show_progress: bool = True,
) -> FreshResult:
    """``starts`` fresh processes of each server, taking turns; their first requests."""
    import asyncio
    import os
    import sys
    import time
    from contextlib import ExitStack

    from bench.harness.client import Target
    from bench.harness.record import machine_info, now_iso, versions
    from bench.harness.runner import LoadSpec, measure
    from bench.harness.serve import config_key, ragtime_server, read_config
    from bench.sglang_sim.process import with_simulated_sglang

    def say(text: str) -> None:
        if show_progress:
            print(text, file=sys.stderr, flush=True)

    if starts < 1:
        raise ValueError("at least one fresh start")
    asked = fresh_questions(questions, order)
    bases = {name: read_config(path) for name, path in servers}
    # At the start: ragtime runs from the working tree, and its commit is the one it began on.
    machine, created, started_on = machine_info(), now_iso(), versions()
    done: dict[str, list[FreshStart]] = {name: [] for name, _ in servers}
    shown: dict[str, dict[str, str]] = {}
    for start in range(1, starts + 1):
        turn = list(servers) if start % 2 == 1 else list(reversed(servers))
        for name, _ in turn:
            label = f"{name}-fresh-{start}"
            with ExitStack() as stack:
                config = with_simulated_sglang(
                    stack, bases[name], fake_sglang, log_dir=log_dir, name=label
                )
                say(f"starting {label} ...")
                began = time.perf_counter()
                server = stack.enter_context(ragtime_server(label, config, log_dir=log_dir))
                ready_s = round(time.perf_counter() - began, 3)
                target = Target(name, server.url, config_key(config))
                spec = LoadSpec(
                    users=1, requests=len(asked), budget_ms=budget_ms, timeout_s=timeout_s
                )
                (run,) = asyncio.run(measure([target], asked, spec, show_progress=show_progress))
            got = FreshStart(
                server=name, start=start, ready_s=ready_s, tally=tally(run.requests),
                records=run.requests,
            )  # fmt: skip
            done[name].append(got)
            shown[name] = {k: v for k, v in config.items() if k not in secret_keys}
            t = got.tally
            say(
                f"{label}: ready after {ready_s:.1f} s; useful {t.useful}/{t.requests}, "
                f"within {t.within}, 504 {t.refused}, other {_other(t)}, "
                f"e2e p50 {_ms(t.e2e_ms.p50)} ms"
            )
    if hasattr(os, "getloadavg"):
        machine["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return FreshResult(
        created=created,
        command=command,
        machine=machine,
        versions=started_on,
        budget_ms=budget_ms,
        order=list(order),
        questions=asked,
        servers=[fresh_server(name, str(path), shown[name], done[name]) for name, path in servers],
    )
