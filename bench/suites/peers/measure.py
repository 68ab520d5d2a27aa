"""``ragtime bench peers``'s run: ragtime, the same-work floor and the Haystack peer started once
each, then, run after run, all three under closed loops of users by the bench's own client, and
swept with wrk, side by side.

Every request asks a question none of the three was asked before (``fresh_questions``: no cache
of ragtime's can answer it), and the same questions go to each. In a closed loop the targets take
turns round by round (``bench.harness.runner``); in a sweep, rate by rate, in alternating order,
each phase with bodies of its own, and a target leaves after ``patience`` failing rates
(``bench.suites.ceiling.measure.leaves``). CPU per request is what each server's processes used,
read from ``/proc`` around its load.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from bench.suites.ceiling.measure import (
    Endpoint,
    cpu_seconds,
    fresh_questions,
    sweep,
    workers_of,
)
from bench.suites.ceiling.results import sweep_of
from bench.suites.ceiling.wrk import WrkPhase, write_bodies
from bench.suites.peers.results import (
    FLOOR,
    PEER,
    RAGTIME,
    PeersBench,
    PeersRun,
    TargetLoad,
    figures,
    ratios,
    target_load,
)


@dataclass(frozen=True)
class PeerSpec:
    """How the peer runs: by which interpreter, with which generator, its index kept where."""

    python: str
    generator: str
    index_cache: Path | None


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def closed_loops(
    endpoints: Sequence[Endpoint],
    questions: Sequence[str],
    *,
    run: int,
    users: Sequence[int],
    requests: int,
    warmup: int,
    timeout_s: float = 120.0,
) -> list[TargetLoad]:
    """Each target under each closed loop of ``users``, fresh questions, rounds alternating."""
    from bench.harness.client import Target
    from bench.harness.runner import LoadSpec, measure

    targets = [Target(e.name, e.url, e.key) for e in endpoints]
    loads = []
    for n in users:
        spec = LoadSpec(
            users=n, requests=requests, warmup=warmup, rounds=4, seed=run, timeout_s=timeout_s
        )
        # The warm-up asks from index 10_000 on (bench.harness.runner): past the measured ones.
        asked = fresh_questions(questions, run * 100 + n, 10_000 + warmup + requests)
        before = {e.name: cpu_seconds(e.pid) for e in endpoints}
        runs = asyncio.run(measure(targets, asked, spec, show_progress=False))
        for endpoint, got in zip(endpoints, runs, strict=True):
            start, end = before[endpoint.name], cpu_seconds(endpoint.pid)
            cpu = None if start is None or end is None else end - start
            loads.append(target_load(got, cpu, requests + warmup))
    return loads


def fresh_sweep(
    endpoints: Sequence[Endpoint],
    questions: Sequence[str],
    rates: Sequence[float],
    *,
    run: int,
    work_dir: Path,
    seconds: float,
    min_requests: int,
    factor: float,
    patience: int,
    pause_s: float,
    say: Callable[[str], None],
) -> list[WrkPhase]:
    """The ceiling's ``sweep``, each phase asking questions never asked before (the same ones
    of every endpoint), each phase said with its server's CPU per response; every phase."""

    def bodies(step: int, rate: float, secs: float) -> Path:
        count = math.ceil(rate * (secs + 1)) + 50  # the lead-in's arrivals too: none repeats
        asked = fresh_questions(questions, run * 1000 + step, count)
        return write_bodies(asked, work_dir / f"bodies-{run}-{step}.txt")

    def described(p: WrkPhase) -> str:
        return (
            f"{p.target} p99 {p.latency_ms.p99} ms, {p.answered_rps:g} req/s, "
            f"errors {p.error_ratio:.1%}, CPU {p.server_cpu_ms} ms/response"
        )

    return sweep(
        endpoints, rates, bodies=bodies, seconds=seconds, min_requests=min_requests,
        factor=factor, patience=patience, pause_s=pause_s, seed=run, say=say,
        described=described,
    )  # fmt: skip


def run_peers_bench(
    *,
    config_path: Path,
    questions: Sequence[str],
    users: Sequence[int],
    requests: int,
    warmup: int,
    runs: int,
    rates: Sequence[float],
    seconds: float,
    min_requests: int,
    patience: int,
    pause_s: float,
    peer: PeerSpec | None,
    log_dir: Path,
    work_dir: Path,
    command: str,
    secret_keys: Sequence[str],
    say: Callable[[str], None],
    factor: float = 2.0,
) -> PeersBench:
    """Start the targets, do ``runs`` runs, and gather them (see the module's docstring)."""
    from bench.harness.record import machine_info, now_iso, versions
    from bench.harness.serve import (
        config_key,
        floor_server,
        peer_server,
        ragtime_server,
        read_config,
    )

    machine, created = machine_info(), now_iso()
    config = read_config(config_path)
    workers, tokens = workers_of(config)
    null = config.get("RAGTIME_GENERATION_BACKEND", "llama.cpp") == "null"
    data_dir = Path(
        config.get("RAGTIME_DATA_DIR") or os.environ.get("RAGTIME_DATA_DIR", ".ragtime")
    )
    notes = []
    if not null:
        notes.append("the same-work floor generates nothing: left out of a run with a model")
    done: list[PeersRun] = []
    with ExitStack() as stack:
        say(f"starting ragtime from {config_path} ...")
        server = stack.enter_context(ragtime_server(RAGTIME, config, log_dir=log_dir))
        endpoints = [Endpoint(RAGTIME, server.url, config_key(config), server.pid)]
        if null:
            say(f"starting the same-work floor over {data_dir} ({workers.resolved} processes) ...")
            floor = stack.enter_context(floor_server(
                tokens, name=FLOOR, log_dir=log_dir, same_work=data_dir, workers=workers.resolved
            ))  # fmt: skip
            endpoints.append(Endpoint(FLOOR, floor.url, None, floor.pid))
        if peer is not None:
            say(f"starting the Haystack peer ({peer.generator}; the first start indexes) ...")
            started = stack.enter_context(peer_server(
                peer.python, generator=peer.generator, tokens=tokens, name=PEER,
                index_cache=peer.index_cache, log_dir=log_dir,
            ))  # fmt: skip
            endpoints.append(Endpoint(PEER, started.url, None, started.pid))
        for number in range(1, runs + 1):
            start = _loadavg()
            say(f"run {number} of {runs}: closed loops of {', '.join(map(str, users))} users ...")
            loads = closed_loops(
                endpoints, questions, run=number, users=users, requests=requests, warmup=warmup
            )
            sweeps = []
            if rates:
                say(f"run {number} of {runs}: the sweep by wrk")
                phases = fresh_sweep(
                    endpoints, questions, rates, run=number, work_dir=work_dir, seconds=seconds,
                    min_requests=min_requests, factor=factor, patience=patience, pause_s=pause_s,
                    say=say,
                )  # fmt: skip
                sweeps = [sweep_of(e.name, phases, factor=factor) for e in endpoints]
            done.append(PeersRun(number=number, loads=loads, sweeps=sweeps,
                                 loadavg=[start, _loadavg()]))  # fmt: skip
    machine["loadavg_at_end"] = _loadavg()
    names = [e.name for e in endpoints]
    peer_info = {"generator": peer.generator, "python": peer.python} if peer else {}
    if peer is not None:
        from bench.peers.haystack_app import SPLIT_OVERLAP, SPLIT_WORDS, TOP_K

        peer_info |= {"split_words": str(SPLIT_WORDS), "split_overlap": str(SPLIT_OVERLAP),
                      "top_k": str(TOP_K)}  # fmt: skip
    return PeersBench(
        created=created,
        command=command,
        machine=machine,
        versions=versions(),
        config_path=str(config_path),
        config={k: v for k, v in config.items() if k not in secret_keys},
        workers=workers,
        tokens=tokens,
        peer=peer_info,
        users=list(users),
        requests=requests,
        warmup=warmup,
        rates=sorted(rates),
        seconds=seconds,
        runs=done,
        figures=figures(done, names, users),
        ratios=ratios(done, names[1:], users),
        notes=notes,
    )
