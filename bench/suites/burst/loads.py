"""The burst bench's loads: bursts of questions sent at once, and closed loops of users at each
budget, against servers started from config files; the server's own histograms read around each
burst (its refusal time, its event-loop lag, its requests' wait in the kernel)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Sequence
from typing import Any

import httpx

from bench.harness.client import (
    RequestRecord,
    Target,
    ask_request,
    ask_stream,
    error_message,
    make_client,
    note_sent,
)
from bench.suites.burst.results import (
    BurstBench,
    BurstRepeat,
    BurstResult,
    UsersResult,
    judge_burst,
    summarize_burst,
    summarize_users,
)


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

    from bench.harness.record import machine_info, now_iso, versions
    from bench.harness.serve import config_key, ragtime_server, read_config
    from bench.sglang_sim.process import with_simulated_sglang

    result = BurstBench(
        created=now_iso(), command=command, machine=machine_info(), versions=versions(), targets=[]
    )
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
