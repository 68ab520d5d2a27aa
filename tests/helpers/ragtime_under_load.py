"""A real ragtime under a little load, for tests that watch its metrics from outside: a ``ragtime
serve`` process answering through the SGLang backend from a simulated SGLang 0.5.23 server
(``bench/sglang_sim``, on a thread of the test), and a thread that keeps asking it questions.

Each round asks what ``asks`` says, then searches. By default the load goes through what an
operator's dashboard shows: answers at the default budget held to a first-token target of 1 s,
at a budget small enough to be degraded (``output_capped``), and at a budget no plan can meet
(refused at once, 504 ``budget_infeasible``). After ``slow_after_rounds`` rounds (never, with
None) the engine turns ``slow_factor`` times slower without notice (``POST /bench/pace``), as a
GPU shared with another job would: its first token then takes 3 s, three times the target (the
TTFT alert's condition, deploy/prometheus/alerts.yml, really holds), and the small budgets end in
504s, cut at their deadline or refused. What each request got back is kept, by what it asked.
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


@dataclass(frozen=True)
class Ask:
    """One question of each round: its budget and its first-token target (None: none given)."""

    budget_ms: int | None = None
    ttft_target_ms: int | None = None

    def body(self) -> dict[str, object]:
        body: dict[str, object] = {"question": QUESTION}
        if self.budget_ms is not None:
            body["budget_ms"] = self.budget_ms
        if self.ttft_target_ms is not None:
            body["ttft_target_ms"] = self.ttft_target_ms
        return body


#: Each round's answers: the default budget held to a 1 s first token, one the plan fits by
#: capping the answer, and one below the smallest plan (refused at once).
ROUND: tuple[Ask, ...] = (Ask(ttft_target_ms=1000), Ask(400), Ask(50))
#: What a round's search counts under in ``LoadedRagtime.by_ask``.
SEARCH = "search"


@dataclass
class LoadedRagtime:
    """ragtime's URL and its engine's, and what the load got back so far: each status, by ask
    (a search is ``SEARCH``), and the reports of the answers that say they broke their budget."""

    url: str
    engine_url: str
    statuses: Counter[int] = field(default_factory=Counter)
    by_ask: Counter[tuple[Ask | str, int]] = field(default_factory=Counter)
    over_budget: list[dict[str, object]] = field(default_factory=list)
    rounds: int = 0
    errors: list[str] = field(default_factory=list)

    def got(self, ask: Ask | str, response: httpx.Response) -> None:
        self.statuses[response.status_code] += 1
        self.by_ask[(ask, response.status_code)] += 1
        if response.status_code == 200 and response.json()["budget"]["exceeded"]:
            self.over_budget.append(response.json()["budget"])


def _load(
    loaded: LoadedRagtime,
    api_key: str,
    stopping: threading.Event,
    asks: tuple[Ask, ...],
    slow_after_rounds: int | None,
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
            for ask in asks:
                try:
                    loaded.got(ask, client.post("/v1/ask", json=ask.body()))
                except httpx.HTTPError as exc:  # noted, and the load goes on
                    loaded.errors.append(repr(exc))
            try:
                found = client.post("/v1/search", json={"query": "default argument values"})
                loaded.got(SEARCH, found)
            except httpx.HTTPError as exc:
                loaded.errors.append(repr(exc))
            loaded.rounds += 1


@contextmanager
def ragtime_under_load(
    data_dir: Path,
    api_key: str,
    workdir: Path,
    *,
    asks: tuple[Ask, ...] = ROUND,
    slow_after_rounds: int | None = 3,
    slow_factor: float = 20.0,
    **settings: str,
) -> Iterator[LoadedRagtime]:
    """ragtime serving ``data_dir`` through the simulated engine, with ``RAGTIME_*``
    ``settings``, ready and under load for the block; the load stops, then the server, when it
    ends."""
    engine = SimulatedSGLang()
    # Answers of 8 tokens, the first after 150 ms and the others 5 ms apart: 3 s and 100 ms
    # once paced 20 times slower.
    engine.reset(health_s=0.0, natural_tokens=8, ttft_s=0.15, itl_s=0.005)
    tokenizer = build_tiny_tokenizer(workdir / "tokenizer")
    with ServerThread(engine.app) as engine_server:
        port = free_port()
        process = start_server_on_sglang(data_dir, port, engine_server.url, tokenizer, **settings)
        loaded = LoadedRagtime(f"http://127.0.0.1:{port}", engine_server.url)
        stopping = threading.Event()
        load = threading.Thread(
            target=_load,
            args=(loaded, api_key, stopping, asks, slow_after_rounds, slow_factor),
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
