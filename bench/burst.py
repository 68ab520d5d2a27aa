"""``ragtime bench burst``: what a server answers when many questions arrive at once.

Two shapes of load, each against servers started from config files (``bench.serve``):

* **bursts** (``--bursts 25@1,100@1,200@2``): ``N`` streamed questions sent at the same instant,
  each with the same budget (seconds). After a warm-up of a few requests one at a time, each
  burst runs ``repeats`` times, with the server idle in between. Each request is **answered**
  (a complete answer within its budget), **refused** (503, counted with how long the refusal
  took: it must not wait behind the work it refuses), a **504** (no plan could fit), **late**
  (past its budget, whatever it returned) or an **error** (any other status or a broken
  stream);
* **users** (``--users 12 --budgets-ms 1500,900,600``): closed loops of that many users asking
  back to back at each budget, for ``requests`` requests; **useful** is a complete answer of at
  least ``USEFUL_WORDS`` words within budget (``bench.goodput.is_useful``).

The targets of issue 22 are checked in the report (``TARGETS``).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import httpx
from pydantic import BaseModel, Field

from bench.client import (
    RequestRecord,
    Target,
    ask_request,
    ask_stream,
    error_message,
    make_client,
    note_sent,
)
from bench.goodput import is_useful
from bench.stats import percentiles

SCHEMA_VERSION = "ragtime-bench-burst/1"
USEFUL_WORDS = 5
"""Issue 22's useful answer: a 200 with 5 or more words."""

#: (burst size, budget s) -> (least answered, refusal p99 ms at most, or None)
TARGETS: dict[tuple[int, float], tuple[int, float | None]] = {
    (25, 1.0): (20, None),
    (100, 1.0): (25, 10.0),
    (200, 2.0): (50, None),
}
USERS_TARGET_USEFUL = 0.95
USERS_TARGET_WITHIN = 0.999


def parse_bursts(text: str) -> list[tuple[int, float]]:
    """``25@1,100@1,200@2`` -> ``[(25, 1.0), (100, 1.0), (200, 2.0)]`` (size @ budget s)."""
    bursts = []
    for part in text.split(","):
        size, sep, budget = part.strip().partition("@")
        if not sep or not size.isdigit() or int(size) < 1:
            raise ValueError(f"a burst is SIZE@BUDGET_S, e.g. 25@1; got {part!r}")
        bursts.append((int(size), float(budget)))
    return bursts


class BurstRepeat(BaseModel):
    """One burst as the client saw it."""

    answered: int
    refused: int
    timed_out_504: int
    late: int
    errors: int
    statuses: dict[str, int]
    refusal_ms_p50: float | None
    refusal_ms_p99: float | None
    """From the request's headers written to its refusal read: the server's part."""
    refusal_after_burst_ms_p99: float | None
    """From the burst's start: the client's own sending of the burst included."""
    answered_e2e_ms_p50: float | None
    answered_e2e_ms_max: float | None
    wall_s: float
    late_on_wire: int = 0
    """Of the late, those the server held past the budget after their request reached it
    (the rest were sent late by the client, which shares the server's cores)."""
    server_refusal_ms_p99: float | None = None
    """The server's own figure (``ragtime_admission_refusal_seconds``, arrival to refusal
    sent), as the upper bound of the histogram bucket that holds the 99th percentile."""
    server_refusal_after_read_ms_p99: float | None = None
    """The same from the request's read (``ragtime_admission_refusal_after_read_seconds``,
    headers parsed to refusal sent): the refusal's own delay, without the wait on the socket."""
    server_socket_wait_ms_p99: float | None = None
    """How long the burst's requests waited in the kernel before the server read them
    (``ragtime_request_socket_wait_seconds``): the bound of the bucket holding the p99."""
    sent_ms_p50: float | None = None
    sent_ms_max: float | None = None
    """When the client had written the burst's requests, from the burst's start."""
    refused_body_gap_ms_p99: float | None = None
    """How long after a refused request's headers the client wrote its body, p99: the
    server decides once the body (its budget) is read, and times the refusal from the
    headers' arrival."""
    server_loop_lag_ms_p99: float | None = None
    """The server's event-loop lag while the burst ran (``ragtime_event_loop_lag_measured_
    seconds``, a measurement every 10 ms): the bound of the bucket holding the 99th
    percentile. A request that reached the socket waited about this long before the server's
    first line of code for it ran; its refusal cannot be counted faster."""
    error_samples: list[str] = Field(default_factory=list)


class BurstResult(BaseModel):
    target: str
    size: int
    budget_s: float
    repeats: list[BurstRepeat]
    answered_median: float
    refusal_ms_p99_max: float | None
    """The server's own refusal time, p99 (its histogram bucket's bound), worst repeat."""
    refusal_wire_ms_p99_max: float | None = None
    """The same as the client saw it on the wire (the client shares the server's cores)."""
    refusal_after_read_ms_p99_max: float | None = None
    """The server's, from the request's read to its refusal sent, p99, worst repeat."""
    socket_wait_ms_p99_max: float | None = None
    """The requests' wait in the kernel before their read, p99, worst repeat."""
    body_gap_ms_p99_max: float | None = None
    """The client's gap between a refused request's headers and its body, p99, worst repeat."""
    loop_lag_ms_p99_max: float | None = None
    """The server's event-loop lag during the burst, p99 (its bucket's bound), worst repeat."""
    late_total: int
    errors_total: int
    target_answered: int | None = None
    target_refusal_ms_p99: float | None = None
    met: bool | None = None


class UsersResult(BaseModel):
    target: str
    users: int
    budget_ms: int
    requests: int
    useful: int
    within: int
    refused_503: int
    timed_out_504: int
    other: int
    statuses: dict[str, int]
    useful_share: float
    within_share: float
    ttft_ms_p50: float | None
    e2e_ms_p99: float | None
    met: bool
    other_samples: list[str] = Field(default_factory=list)


class BurstBench(BaseModel):
    schema_version: str = SCHEMA_VERSION
    created: str
    command: str
    machine: dict[str, Any]
    targets: list[dict[str, Any]]
    bursts: list[BurstResult] = Field(default_factory=list)
    users: list[UsersResult] = Field(default_factory=list)


def classify(record: RequestRecord) -> str:
    """answered, refused, 504, late or error (see the module docstring)."""
    if record.e2e_ms is None:
        return "error"
    if record.budget_ms is not None and record.e2e_ms > record.budget_ms:
        return "late"
    if record.status == 200 and record.outcome == "ok":
        return "answered" if not record.budget_exceeded else "late"
    if record.status == 503:
        return "refused"
    if record.status == 504:
        return "504"
    return "error"


def summarize_burst(records: Sequence[RequestRecord], wall_s: float) -> BurstRepeat:
    kinds = Counter(classify(r) for r in records)
    refused = [r for r in records if classify(r) == "refused" and r.e2e_ms is not None]
    late = [r for r in records if classify(r) == "late" and r.e2e_ms is not None]
    late_on_wire = sum(
        1 for r in late if (r.e2e_ms or 0.0) - (r.sent_ms or 0.0) > (r.budget_ms or 0.0)
    )
    sent = sorted(r.sent_ms for r in records if r.sent_ms is not None)
    refusals = [r.e2e_ms - (r.sent_ms or 0.0) for r in refused if r.e2e_ms is not None]
    gaps = [
        r.body_sent_ms - r.sent_ms
        for r in refused
        if r.body_sent_ms is not None and r.sent_ms is not None
    ]
    after_burst = [r.e2e_ms for r in refused if r.e2e_ms is not None]
    answered = [r.e2e_ms for r in records if classify(r) == "answered" and r.e2e_ms is not None]
    samples = sorted({f"{r.status} {r.error}" for r in records if classify(r) == "error"})[:5]
    return BurstRepeat(
        answered=kinds["answered"],
        refused=kinds["refused"],
        timed_out_504=kinds["504"],
        late=kinds["late"],
        errors=kinds["error"],
        statuses={str(k): v for k, v in sorted(Counter(r.status for r in records).items())},
        refusal_ms_p50=_rounded(_pct(refusals, 50)),
        refusal_ms_p99=_rounded(_pct(refusals, 99)),
        refusal_after_burst_ms_p99=_rounded(_pct(after_burst, 99)),
        answered_e2e_ms_p50=_rounded(_pct(answered, 50)),
        answered_e2e_ms_max=_rounded(max(answered) if answered else None),
        wall_s=round(wall_s, 3),
        late_on_wire=late_on_wire,
        sent_ms_p50=_rounded(_pct(sent, 50)),
        sent_ms_max=_rounded(sent[-1] if sent else None),
        refused_body_gap_ms_p99=_rounded(_pct(gaps, 99)),
        error_samples=samples,
    )


def judge_burst(target: str, size: int, budget_s: float, repeats: list[BurstRepeat]) -> BurstResult:
    answered = sorted(r.answered for r in repeats)
    result = BurstResult(
        target=target,
        size=size,
        budget_s=budget_s,
        repeats=repeats,
        answered_median=float(answered[len(answered) // 2]) if answered else 0.0,
        refusal_ms_p99_max=_worst(r.server_refusal_ms_p99 for r in repeats),
        refusal_wire_ms_p99_max=_worst(r.refusal_ms_p99 for r in repeats),
        loop_lag_ms_p99_max=_worst(r.server_loop_lag_ms_p99 for r in repeats),
        refusal_after_read_ms_p99_max=_worst(r.server_refusal_after_read_ms_p99 for r in repeats),
        socket_wait_ms_p99_max=_worst(r.server_socket_wait_ms_p99 for r in repeats),
        body_gap_ms_p99_max=_worst(r.refused_body_gap_ms_p99 for r in repeats),
        late_total=sum(r.late for r in repeats),
        errors_total=sum(r.errors for r in repeats),
    )
    goal = TARGETS.get((size, budget_s))
    if goal is not None:
        least, p99 = goal
        result.target_answered, result.target_refusal_ms_p99 = least, p99
        result.met = (
            result.answered_median >= least
            and result.late_total == 0
            and result.errors_total == 0
            and (p99 is None or (result.refusal_ms_p99_max or 0.0) <= p99)
        )
    return result


async def run_burst(
    client: httpx.AsyncClient,
    target: Target,
    questions: Sequence[str],
    size: int,
    budget_s: float,
    *,
    timeout_s: float,
) -> BurstRepeat:
    """``size`` questions sent at once; what came back."""
    budget_ms = int(budget_s * 1000)
    due = time.perf_counter()
    records = await asyncio.gather(
        *(
            lean_ask(client, target, questions[i % len(questions)], index=i, due=due,
                     budget_ms=budget_ms, timeout_s=timeout_s)
            for i in range(size)
        )
    )  # fmt: skip
    return summarize_burst(records, time.perf_counter() - due)


async def lean_ask(
    client: httpx.AsyncClient,
    target: Target,
    question: str,
    *,
    index: int,
    due: float,
    budget_ms: int,
    timeout_s: float,
) -> RequestRecord:
    """One streamed question, read as cheaply as a client can: the stream's bytes are scanned
    for its events, and only the last one (``done`` or ``error``) is parsed. The load generator
    shares the server's cores, and ``ask_stream``'s parsing of every token of 200 streams at
    once delayed the sending of the burst's last requests by seconds."""
    record = RequestRecord(
        target=target.name, index=index, scheduled_s=0.0, start_lag_ms=0.0, status=0,
        outcome="incomplete", budget_ms=budget_ms,
    )  # fmt: skip
    payload, headers = ask_request(target, question, budget_ms)
    try:
        async with asyncio.timeout(timeout_s):
            async with client.stream(
                "POST", f"{target.url}/v1/ask", json=payload, headers=headers,
                extensions=note_sent(record, due),
            ) as response:  # fmt: skip
                record.status = response.status_code
                body = b"".join([chunk async for chunk in response.aiter_raw()])
    except TimeoutError:
        record.outcome, record.error = "timeout", f"no answer within {timeout_s:g} s"
        return record
    except httpx.HTTPError as exc:
        record.outcome, record.error = "transport_error", f"{type(exc).__name__}: {exc}"
        return record
    record.e2e_ms = round((time.perf_counter() - due) * 1000.0, 3)
    if record.status != 200:
        record.outcome = "http_error"
        record.error = error_message(body.decode(errors="replace"))
        return record
    record.tokens = record.answer_words = body.count(b"event: token")
    last = body.rfind(b"event: ")
    kind = body[last + 7 : body.find(b"\n", last)].strip() if last >= 0 else b""
    if kind == b"done":
        record.outcome = "ok"
        data = body[body.find(b"data:", last) + 5 :].split(b"\n", 1)[0]
        try:
            exceeded = (json.loads(data).get("budget") or {}).get("exceeded")
            record.budget_exceeded = bool(exceeded) if exceeded is not None else None
        except ValueError:
            pass
    else:
        record.outcome, record.error = "stream_error", kind.decode(errors="replace")
    return record


async def burst_target(
    target: Target,
    questions: Sequence[str],
    bursts: Sequence[tuple[int, float]],
    *,
    repeats: int,
    warmup: int,
    pause_s: float,
    timeout_s: float,
    say: Any = print,
) -> list[BurstResult]:
    async with make_client(max_connections=8, timeout_s=timeout_s) as client:
        for i in range(warmup):
            await ask_stream(client, target, questions[i % len(questions)], timeout_s=timeout_s)
    results = []
    for size, budget_s in bursts:
        done = []
        for n in range(repeats):
            await asyncio.sleep(pause_s)
            # A fresh client each burst: httpx's pool, reused after a burst, wrote the next
            # burst's requests seconds late (even to the bare FastAPI floor).
            async with make_client(max_connections=size + 8, timeout_s=timeout_s) as client:
                before = await server_histograms(client, target.url)
                rep = await run_burst(
                    client, target, questions, size, budget_s, timeout_s=timeout_s
                )
                after = await server_histograms(client, target.url)
            rep.server_refusal_ms_p99 = bucket_p99_ms(before[REFUSALS], after[REFUSALS])
            rep.server_loop_lag_ms_p99 = bucket_p99_ms(before[LOOP_LAG], after[LOOP_LAG])
            rep.server_refusal_after_read_ms_p99 = bucket_p99_ms(
                before[REFUSALS_AFTER_READ], after[REFUSALS_AFTER_READ]
            )
            rep.server_socket_wait_ms_p99 = bucket_p99_ms(before[SOCKET_WAIT], after[SOCKET_WAIT])
            say(
                f"{target.name}: burst {size}@{budget_s:g}s #{n + 1}: "
                f"answered {rep.answered}, refused {rep.refused} "
                f"(p99 {rep.refusal_ms_p99} ms), 504 {rep.timed_out_504}, late {rep.late} "
                f"({rep.late_on_wire} on the wire), errors {rep.errors}"
            )
            done.append(rep)
        results.append(judge_burst(target.name, size, budget_s, done))
    return results


async def users_target(
    target: Target,
    questions: Sequence[str],
    users: int,
    budgets_ms: Sequence[int],
    *,
    requests: int,
    warmup: int,
    timeout_s: float,
    say: Any = print,
) -> list[UsersResult]:
    """Closed loops of ``users`` at each budget: how many got useful answers."""
    out = []
    async with make_client(max_connections=users + 8, timeout_s=timeout_s) as client:
        for i in range(warmup):
            await ask_stream(client, target, questions[i % len(questions)], timeout_s=timeout_s)
        for budget_ms in budgets_ms:
            records = await closed_loop_at(
                client, target, questions, users, budget_ms, requests=requests, timeout_s=timeout_s
            )
            result = summarize_users(target.name, users, budget_ms, records)
            say(
                f"{target.name}: {users} users at {budget_ms} ms: useful "
                f"{result.useful}/{result.requests}, within {result.within}, "
                f"503 {result.refused_503}, 504 {result.timed_out_504}, other {result.other}"
            )
            out.append(result)
    return out


async def closed_loop_at(
    client: httpx.AsyncClient,
    target: Target,
    questions: Sequence[str],
    users: int,
    budget_ms: int,
    *,
    requests: int,
    timeout_s: float,
) -> list[RequestRecord]:
    """``requests`` questions asked by ``users`` users, each asking as soon as answered."""
    records: list[RequestRecord] = []
    turns = iter(range(requests))

    async def user() -> None:
        for i in turns:
            question = questions[i % len(questions)]
            records.append(
                await ask_stream(
                    client, target, question, index=i, budget_ms=budget_ms, timeout_s=timeout_s
                )
            )

    await asyncio.gather(*(user() for _ in range(users)))
    return records


def summarize_users(
    target: str, users: int, budget_ms: int, records: Sequence[RequestRecord]
) -> UsersResult:
    useful = sum(1 for r in records if is_useful(r) and r.answer_words >= USEFUL_WORDS)
    kinds = Counter(classify(r) for r in records)
    within = kinds["answered"] + kinds["refused"] + kinds["504"]
    n = max(len(records), 1)
    ttfts = [r.ttft_ms for r in records if r.ttft_ms is not None]
    e2es = [r.e2e_ms for r in records if r.e2e_ms is not None]
    return UsersResult(
        target=target,
        users=users,
        budget_ms=budget_ms,
        requests=len(records),
        useful=useful,
        within=within,
        refused_503=kinds["refused"],
        timed_out_504=kinds["504"],
        other=kinds["late"] + kinds["error"],
        statuses={str(k): v for k, v in sorted(Counter(r.status for r in records).items())},
        useful_share=round(useful / n, 4),
        within_share=round(within / n, 4),
        ttft_ms_p50=_rounded(_pct(ttfts, 50)),
        e2e_ms_p99=_rounded(_pct(e2es, 99)),
        met=useful / n >= USERS_TARGET_USEFUL and within / n >= USERS_TARGET_WITHIN,
        other_samples=[_sample(r) for r in records if classify(r) in ("late", "error")][:8],
    )


def _sample(record: RequestRecord) -> str:
    return (
        f"{classify(record)} {record.status} {record.outcome} e2e {record.e2e_ms} ms "
        f"{record.finish_reason or ''} {record.error or ''} {record.timings_ms}"
    )


REFUSALS = "ragtime_admission_refusal_seconds"
LOOP_LAG = "ragtime_event_loop_lag_measured_seconds"
REFUSALS_AFTER_READ = "ragtime_admission_refusal_after_read_seconds"
SOCKET_WAIT = "ragtime_request_socket_wait_seconds"
_BUCKET = re.compile(r'^(\w+)_bucket\{le="([^"]+)"\} (\S+)$', re.M)


def histogram_buckets(text: str, names: Sequence[str]) -> dict[str, dict[float, float]]:
    """Each named histogram (without labels) in a Prometheus text exposition: cumulative counts
    by bucket bound (s); empty for one the text does not hold."""
    found: dict[str, dict[float, float]] = {name: {} for name in names}
    for name, le, count in _BUCKET.findall(text):
        if name in found:
            found[name][float(le)] = float(count)
    return found


async def server_histograms(client: httpx.AsyncClient, url: str) -> dict[str, dict[float, float]]:
    """The server's refusal-time (from arrival and from read) and loop-lag histograms now
    (empty when unreadable)."""
    try:
        text = (await client.get(f"{url}/metrics")).text
    except httpx.HTTPError:
        text = ""
    return histogram_buckets(text, (REFUSALS, REFUSALS_AFTER_READ, LOOP_LAG, SOCKET_WAIT))


def bucket_p99_ms(before: dict[float, float], after: dict[float, float]) -> float | None:
    """The bound (ms) of the first bucket holding 99% of what was observed between two
    readings of a histogram."""
    counts = {le: after[le] - before.get(le, 0.0) for le in after}
    total = counts.get(float("inf"), 0.0)
    if total <= 0:
        return None
    for le in sorted(counts):
        if counts[le] >= 0.99 * total:
            return le * 1000.0
    return None


def _worst(values: Iterable[float | None]) -> float | None:
    """The largest of the figures the repeats have (None when none has one)."""
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _pct(values: Sequence[float], q: float) -> float | None:
    return percentiles(values, [q])[0] if values else None


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def run_burst_bench(
    *,
    servers: Sequence[tuple[str, Any]],
    questions: Sequence[str],
    bursts: Sequence[tuple[int, float]],
    users: int | None,
    budgets_ms: Sequence[int],
    requests: int,
    repeats: int,
    warmup: int,
    pause_s: float,
    timeout_s: float,
    log_dir: Any,
    command: str,
    fake_sglang: str | None,
    secret_keys: Sequence[str],
    say: Any = print,
) -> BurstBench:
    """Start each server in turn (with its simulated SGLang server when asked) and run the
    bursts, then the users' loops, against it."""
    from contextlib import ExitStack

    from bench.report import machine_info, now_iso
    from bench.serve import config_key, ragtime_server, read_config
    from bench.sglang_sim.process import with_simulated_sglang

    result = BurstBench(created=now_iso(), command=command, machine=machine_info(), targets=[])
    for name, path in servers:
        with ExitStack() as stack:
            config = read_config(path)
            config = with_simulated_sglang(stack, config, fake_sglang, log_dir=log_dir, name=name)
            say(f"starting {name} from {path} ...")
            server = stack.enter_context(ragtime_server(name, config, log_dir=log_dir))
            target = Target(name, server.url, config_key(config))
            shown = {k: v for k, v in config.items() if k not in secret_keys}
            result.targets.append({"name": name, "config_path": str(path), "config": shown})
            if bursts:
                result.bursts += asyncio.run(
                    burst_target(target, questions, bursts, repeats=repeats, warmup=warmup,
                                 pause_s=pause_s, timeout_s=timeout_s, say=say)
                )  # fmt: skip
            if users:
                result.users += asyncio.run(
                    users_target(target, questions, users, budgets_ms, requests=requests,
                                 warmup=warmup, timeout_s=timeout_s, say=say)
                )  # fmt: skip
    return result


def text_report(bench: BurstBench) -> str:
    lines = [f"# {bench.command}", ""]
    if bench.bursts:
        lines.append(
            "| server | burst | budget | answered (median) | target | refusal p99 ms, server "
            "(after read; wire) | 504 | late (on the wire) | sent by, p50 / max ms | errors "
            "| met |"
        )
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for b in bench.bursts:
            n = len(b.repeats)
            lines.append(
                f"| {b.target} | {b.size} | {b.budget_s:g} s | {b.answered_median:g} "
                f"({', '.join(str(r.answered) for r in b.repeats)}) | "
                f"{b.target_answered if b.target_answered is not None else '-'} | "
                f"{_ms(b.refusal_ms_p99_max)} ({_ms(b.refusal_after_read_ms_p99_max)}; "
                f"{_ms(b.refusal_wire_ms_p99_max)}) | "
                f"{sum(r.timed_out_504 for r in b.repeats)} in {n} runs | {b.late_total} "
                f"({sum(r.late_on_wire for r in b.repeats)}) | "
                f"{', '.join(_sent(r) for r in b.repeats)} | "
                f"{b.errors_total} | {_met(b.met)} |"
            )
    if bench.users:
        lines += ["", "| server | users | budget | useful | within | 503 | 504 | other | "
                  "TTFT p50 ms | met |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- "
                  "| --- |"]  # fmt: skip
        for u in bench.users:
            lines.append(
                f"| {u.target} | {u.users} | {u.budget_ms} ms | {u.useful}/{u.requests} "
                f"({u.useful_share:.0%}) | {u.within_share:.1%} | {u.refused_503} | "
                f"{u.timed_out_504} | {u.other} | {u.ttft_ms_p50} | {_met(u.met)} |"
            )
    return "\n".join(lines)


def _sent(rep: BurstRepeat) -> str:
    return f"{_ms(rep.sent_ms_p50)} / {_ms(rep.sent_ms_max)}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _met(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "missed")


def write_burst_json(bench: BurstBench, path: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(bench.model_dump_json(indent=1) + "\n")
