"""A real ragtime under a little load, for tests that watch its metrics from outside: a ``ragtime
serve`` process answering through the SGLang backend from a simulated SGLang 0.5.23 server
(``bench/sglang_sim``, on a thread of the test), and a thread that keeps asking it questions.

The load goes through what an operator's dashboard shows: answers at the default budget and at
budgets small enough to be degraded (``output_capped``), budgets no plan can meet (refused at
once, 504 ``budget_infeasible``), searches; then, after ``slow_after_rounds`` rounds, the engine
turns ``slow_factor`` times slower without notice (``POST /bench/pace``), as a GPU shared with
another job would. Its first token then takes 3 s, over ragtime's TTFT target of 2 s: the TTFT
alert's condition (deploy/prometheus/alerts.yml) really holds, and the small budgets end in
504s, cut at their deadline or refused.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.sglang_sim.server import SimulatedSGLang
from bench.sglang_sim.tokenizer import build_tiny_tokenizer
from tests.fakes._serve import ServerThread
from tests.helpers.ports import free_port
from tests.helpers.processes import start_server_on_sglang, stop, wait_ready

QUESTION = "How do I define a function with a default value?"
#: Budgets (ms) of each round's answers: the default, one the plan fits by capping the answer,
#: and one below the smallest plan (refused at once).
ROUND_BUDGETS: tuple[int | None, ...] = (None, 400, 50)


@dataclass
class LoadedRagtime:
    """ragtime's URL and its engine's, and what the load got back so far (status: count)."""

    url: str
    engine_url: str
    statuses: Counter[int] = field(default_factory=Counter)
    rounds: int = 0
    errors: list[str] = field(default_factory=list)


def _load(
    loaded: LoadedRagtime,
    api_key: str,
    stopping: threading.Event,
    slow_after_rounds: int,
    slow_factor: float,
) -> None:
    headers = {"Authorization": f"Bearer {api_key}"}
    with httpx.Client(base_url=loaded.url, headers=headers, timeout=30) as client:
        while not stopping.is_set():
            if loaded.rounds == slow_after_rounds:
                paced = httpx.post(
                    f"{loaded.engine_url}/bench/pace", json={"factor": slow_factor}, timeout=5
                )
                paced.raise_for_status()
            for budget in ROUND_BUDGETS:
                body: dict[str, object] = {"question": QUESTION}
                if budget is not None:
                    body["budget_ms"] = budget
                try:
                    loaded.statuses[client.post("/v1/ask", json=body).status_code] += 1
                except httpx.HTTPError as exc:  # noted, and the load goes on
                    loaded.errors.append(repr(exc))
            try:
                found = client.post("/v1/search", json={"query": "default argument values"})
                loaded.statuses[found.status_code] += 1
            except httpx.HTTPError as exc:
                loaded.errors.append(repr(exc))
            loaded.rounds += 1


@contextmanager
def ragtime_under_load(
    data_dir: Path,
    api_key: str,
    workdir: Path,
    *,
    slow_after_rounds: int = 3,
    slow_factor: float = 20.0,
) -> Iterator[LoadedRagtime]:
    """ragtime serving ``data_dir`` through the simulated engine, ready and under load for the
    block; the load stops, then the server, when it ends."""
    engine = SimulatedSGLang()
    # Answers of 8 tokens, the first after 150 ms and the others 5 ms apart: 3 s and 100 ms
    # once paced 20 times slower.
    engine.reset(health_s=0.0, natural_tokens=8, ttft_s=0.15, itl_s=0.005)
    tokenizer = build_tiny_tokenizer(workdir / "tokenizer")
    with ServerThread(engine.app) as engine_server:
        port = free_port()
        process = start_server_on_sglang(data_dir, port, engine_server.url, tokenizer)
        loaded = LoadedRagtime(f"http://127.0.0.1:{port}", engine_server.url)
        stopping = threading.Event()
        load = threading.Thread(
            target=_load,
            args=(loaded, api_key, stopping, slow_after_rounds, slow_factor),
            daemon=True,
        )
        try:
            wait_ready(loaded.url, process)
            load.start()
            yield loaded
        finally:
            stopping.set()
            if load.is_alive():
                load.join(timeout=60)
            stop(process)
