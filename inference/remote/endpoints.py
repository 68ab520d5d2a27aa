"""One model of each remote endpoint: its state (up, busy, draining, down, and why), what it
told us when it joined (context length, batch size) and its latest load.

An endpoint is a server (one SGLang engine, or an OpenAI-compatible server) or SGLang's gateway
in front of a pool of them (``sglang-router``, ``smg``): ``EndpointState.kind`` says which, once
its readiness route has answered. What each tells, and where, is read leniently (``reports``):
unknown keys are ignored, and a fact no route gives stays at what the operator configured
(``options.RemoteOptions.context_length``, ``.max_running``).

``EndpointState`` is the only place an endpoint's health lives: a request that fails marks it
(``mark_down`` for a server's fault, ``mark_busy`` for a full queue; a request's own error
marks nothing), and the background poll of its backend (``PolledBackend.poll_once``)
moves it back and refreshes its load. Nothing here waits on the network; the request path
only reads. The endpoints to try for a request, in order: ``order_endpoints``.
"""

from __future__ import annotations

import logging
import time
from enum import StrEnum
from typing import Any, Literal

from inference.backend import TargetLoad
from inference.errors import GenerationRejected
from inference.remote.reports import (
    count_in,
    gauge_counts,
    has_gauges,
    label_count,
    load_entries,
    positive_int,
    summed_capacity,
)
from inference.remote.scheduling import PriorityScheduling, read_priority_scheduling

log = logging.getLogger(__name__)


class Health(StrEnum):
    UP = "up"
    BUSY = "busy"
    """Its queue is full: it refused a request, it is not broken."""
    DRAINING = "draining"
    """It was up and now says it is not ready (stopping): no new requests."""
    DOWN = "down"
    """Unreachable, a 5xx, a stall, or not started yet."""


Kind = Literal["server", "gateway"]

#: What SGLang's gateways answer ``/generate`` with when no worker can take the model: smg
#: (``model_gateway/src/routers/http/router.rs``) 404 ``model_not_found``, sglang-router 0.3.2
#: 503 ``no_available_workers``. The pool is empty, not misconfigured.
EMPTY_POOL_CODES = frozenset({"model_not_found", "no_available_workers", "no_workers"})


class EndpointState:
    """One endpoint's health, facts and load; see the module docstring. ``context_length`` and
    ``max_running`` start at the configured fallbacks (None: unknown)."""

    def __init__(
        self, url: str, *, context_length: int | None = None, max_running: int | None = None
    ) -> None:
        self.url = url.rstrip("/")
        self.health = Health.DOWN
        self.reason = "not polled yet"
        self.changed_at = 0.0
        self.joined = False
        """Whether its facts (context length, batch size) were read since it last came up."""
        self.readiness: str | None = None
        """The readiness route it answered (``/ready``, ``/readiness``, ``/health``); None:
        not found yet."""
        self.context_length = context_length
        self.max_running = max_running
        """Requests it decodes at once; behind a gateway, each worker."""
        self.workers: int | None = None
        """Behind a gateway: its healthy workers, at the last poll."""
        self.priority: PriorityScheduling | None = None
        """How it orders its queue by ``priority``, as ``/server_info`` said (None: it does
        not, did not say, or is not told deadlines: no priority is sent to it)."""
        self.load = TargetLoad()
        self.ttft_ms: float | None = None
        """The latest known recent TTFT (kept when a poll saw no new request), for routing."""
        self.itl_ms: float | None = None
        self.in_flight = 0
        """Requests this process is streaming from it now (known without polling)."""
        self._ttft_total: tuple[float, float] | None = None
        self._itl_total: tuple[float, float] | None = None

    def __repr__(self) -> str:
        return f"EndpointState({self.url!r}, {self.health.value}: {self.reason!r})"

    @property
    def kind(self) -> Kind | None:
        """``gateway`` when it answered SGLang's gateway's ``/readiness``; None until it has
        answered a readiness route."""
        if self.readiness is None:
            return None
        return "gateway" if self.readiness == "/readiness" else "server"

    @property
    def up(self) -> bool:
        return self.health is Health.UP

    @property
    def serving(self) -> bool:
        """Whether a request may be sent now: up, or busy for long enough."""
        if self.health is Health.UP:
            return True
        return self.health is Health.BUSY and self._since() >= 0

    def retry_due(self, cooldown_s: float) -> bool:
        """A down (or draining) endpoint whose last failure is older than ``cooldown_s``."""
        return self.health in (Health.DOWN, Health.DRAINING) and (
            time.monotonic() - self.changed_at >= cooldown_s
        )

    def _since(self) -> float:
        return time.monotonic() - self.changed_at

    def _set(self, health: Health, reason: str) -> None:
        if health is not self.health:
            level = logging.INFO if health is Health.UP else logging.WARNING
            log.log(level, "%s: %s -> %s (%s)", self.url, self.health, health, reason or "ok")
        if health is not Health.UP and self.health is not health:
            self.changed_at = time.monotonic()
        if health is Health.DOWN:
            self.joined = False  # it may come back as another server
        self.health, self.reason = health, reason

    def mark_up(self) -> None:
        self._set(Health.UP, "")

    def mark_down(self, reason: str) -> None:
        self._set(Health.DOWN, reason)
        self.changed_at = time.monotonic()

    def mark_not_ready(self, reason: str) -> None:
        """A poll found the endpoint not ready: draining if it was serving, else still down."""
        if self.health in (Health.UP, Health.BUSY, Health.DRAINING):
            self.mark_draining(reason)
        else:
            self.mark_down(reason)

    def fit_output(
        self, prompt_tokens: int, max_tokens: int, least: int, backend: str
    ) -> tuple[int, tuple[str, str] | None]:
        """``max_tokens`` capped to this endpoint's context length, and the degradation if so;
        ``GenerationRejected`` when the prompt leaves room for fewer than ``least`` tokens.
        SGLang refuses prompt + output > context, so exactly the context length is served."""
        context = self.context_length
        if context is None or prompt_tokens + max_tokens <= context:
            return max_tokens, None
        room = context - prompt_tokens
        least = min(least, max_tokens)
        if room < least:
            raise GenerationRejected(
                f"{backend}: the prompt ({prompt_tokens} tokens) leaves no room for "
                f"{least} output tokens in {self.url}'s context length of {context} tokens"
            )
        return room, (
            "output_capped",
            f"context length {context}: {prompt_tokens} prompt tokens leave room for "
            f"{room} of {max_tokens} output tokens",
        )

    def mark_draining(self, reason: str) -> None:
        self._set(Health.DRAINING, reason)

    def mark_busy(self, reason: str, for_s: float) -> None:
        """Behind the others for ``for_s`` seconds; it serves again after that, poll or not."""
        if self.health is Health.DOWN:
            return
        self._set(Health.BUSY, reason)
        self.changed_at = time.monotonic() + for_s  # ``serving`` once this moment is past

    # -- what polls tell us ------------------------------------------------------------------

    def read_info(self, *bodies: Any) -> None:
        """The context length and batch size from the bodies of the routes that tell them, each
        fact only where it is given; later bodies win, so pass the most exact last.

        - ``GET /v1/models`` (SGLang, vLLM): each card's ``max_model_len``, the served context.
        - ``/server_info`` (SGLang 0.5.23, ``entrypoints/http_server.py``): ``context_length``
          and ``max_running_requests`` as given at launch (``None`` unless set), and
          ``internal_states[].effective_max_running_requests_per_dp``, one per data-parallel
          rank: the batch the scheduler really runs.
        - ``/model_info``: older servers' ``context_length``; 0.5.23 has none there.

        ``/server_info`` also says whether the server orders its queue by ``priority``
        (``scheduling.read_priority_scheduling``); behind SMG, ``/get_server_info`` is its first
        healthy worker's.
        """
        for body in bodies:
            if not isinstance(body, dict):
                continue
            priority = read_priority_scheduling(body)
            if priority is not False:
                self.priority = priority
            data = body.get("data")
            cards = data if isinstance(data, list) else [body]
            for card in cards:
                if not isinstance(card, dict):
                    continue
                for key in ("max_model_len", "context_length", "max_context_length"):
                    value = positive_int(card.get(key))
                    if value is not None:
                        self.context_length = value
                        break
                running = positive_int(card.get("max_running_requests"))
                states = card.get("internal_states")
                if isinstance(states, list):
                    per_rank = [
                        positive_int(x.get("effective_max_running_requests_per_dp"))
                        for x in states
                        if isinstance(x, dict)
                    ]
                    if per_rank and all(n is not None for n in per_rank):
                        running = sum(n for n in per_rank if n is not None)
                if running is not None:
                    self.max_running = running
        self.joined = True

    def read_workers(self, body: Any) -> None:
        """A gateway's ``/workers`` list. smg 1.13.0 labels each worker with what it read from
        it (``max_model_len`` from its ``/v1/models``; ``context_length`` and
        ``max_running_requests`` where its ``/server_info`` gave them) and lists its models with
        their ``context_length``; sglang-router 0.3.2 tells neither. A pool is as long as its
        shortest worker context; each worker is counted at the smallest batch."""
        workers = body.get("workers") if isinstance(body, dict) else None
        if not isinstance(workers, list):
            return
        healthy = [w for w in workers if isinstance(w, dict) and w.get("is_healthy", True)]
        contexts, batches = [], []
        for worker in healthy:
            labels = worker.get("labels")
            labels = labels if isinstance(labels, dict) else {}
            models = worker.get("models")
            cards = [m for m in models if isinstance(m, dict)] if isinstance(models, list) else []
            told = [labels.get("max_model_len"), labels.get("context_length")]
            told += [card.get("context_length") for card in cards]
            contexts.append(next((n for n in map(label_count, told) if n is not None), None))
            batches.append(label_count(labels.get("max_running_requests")))
        if contexts and all(c is not None for c in contexts):
            self.context_length = min(c for c in contexts if c is not None)
        if batches and all(b is not None for b in batches):
            self.max_running = min(b for b in batches if b is not None)

    def read_readiness(self, body: Any) -> None:
        """A gateway's ``/readiness`` body: its ``healthy_workers``."""
        count = body.get("healthy_workers") if isinstance(body, dict) else None
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            self.workers = count

    def read_load(self, loads: Any, metrics: dict[str, float], *, ours: int = 0) -> None:
        """One server's ``GET /v1/loads`` body (one entry per data-parallel rank, 0.5.23's
        ``managers/load_snapshot.py``: ``num_running_reqs``, ``num_waiting_reqs``,
        ``max_running_requests``) and ``/metrics`` samples. Without a loads body (None: the route
        failed), the counts come from the metrics' gauges. ``ours``: this process's requests
        at the endpoint when the poll was sent."""
        entries = load_entries(loads)
        if entries:
            running = sum(count_in(x, "num_running_reqs") for x in entries)
            waiting = sum(count_in(x, "num_waiting_reqs") for x in entries)
            capacity = summed_capacity(entries)
            if capacity is not None:
                self.max_running = capacity
        else:
            running, waiting = gauge_counts(metrics)
        self._set_load(running, waiting, self.max_running, metrics, ours)

    def read_gateway_load(self, loads: Any, metrics: dict[str, float], *, ours: int = 0) -> None:
        """A gateway's ``/get_loads`` and its workers' metrics (``/engine_metrics``).

        sglang-router 0.3.2 lists ``{"workers": [{"worker", "load"}]}``, each load read from the
        worker's ``/get_load``, which 0.5.23 no longer has: -1, unknown (not down). smg 1.13.0
        lists its load monitor's ``{"loads": [{"worker", "num_running_reqs", ...,
        "max_running_requests"}]}`` per worker and rank, up to its monitor interval old. Running
        and waiting come from the workers' live gauges when the metrics have them; the pool's
        capacity from the entries' batch sizes, else its healthy workers times each one's."""
        entries = load_entries(loads)
        running, waiting = gauge_counts(metrics)
        if not has_gauges(metrics) and entries:
            running = sum(count_in(x, "num_running_reqs") for x in entries)
            waiting = sum(count_in(x, "num_waiting_reqs") for x in entries)
        capacity = summed_capacity(entries)
        if capacity is None and self.max_running is not None and self.workers:
            capacity = self.max_running * self.workers
        self._set_load(running, waiting, capacity, metrics, ours)

    def _set_load(
        self,
        running: int,
        waiting: int,
        capacity: int | None,
        metrics: dict[str, float],
        ours: int,
    ) -> None:
        ttft = self._recent(metrics, "time_to_first_token_seconds", "_ttft_total")
        itl = self._recent(metrics, "inter_token_latency_seconds", "_itl_total")
        priority = self.priority
        self.load = TargetLoad(
            running=running, waiting=waiting, max_running=capacity, ttft_ms=ttft, itl_ms=itl,
            others=max(running + waiting - ours, 0),
            earliest_deadline_first=priority is not None,
            preempts=priority is not None and priority.preempts,
        )  # fmt: skip
        self.ttft_ms = self.ttft_ms if ttft is None else ttft
        self.itl_ms = self.itl_ms if itl is None else itl

    def _recent(self, metrics: dict[str, float], name: str, attr: str) -> float | None:
        """The histogram's mean over the samples since the last poll; None when none came."""
        total = metrics.get(f"sglang:{name}_sum"), metrics.get(f"sglang:{name}_count")
        if total[0] is None or total[1] is None:
            return None
        now: tuple[float, float] = (total[0], total[1])
        before: tuple[float, float] | None = getattr(self, attr)
        setattr(self, attr, now)
        if before is not None and now[1] < before[1]:
            before = None  # the server restarted: its counters began again
        d_sum, d_count = (now[0] - before[0], now[1] - before[1]) if before else now
        if d_count <= 0:
            return None
        return d_sum / d_count * 1000.0


def order_endpoints(
    states: list[EndpointState], turn: int, cooldown_s: float
) -> list[EndpointState]:
    """The endpoints to try: those serving, least loaded first (rotating among equals from
    ``turn``), then busy ones, then down ones due a retry; every one when none of those is
    left."""
    n = len(states)

    def load(item: tuple[int, EndpointState]) -> tuple[int, int, int]:
        i, s = item
        return (s.load.waiting, s.in_flight, (i - turn) % n)

    serving = [s for _, s in sorted(enumerate(states), key=load) if s.serving]
    rotated = states[turn:] + states[:turn]
    busy = [s for s in rotated if s.health is Health.BUSY and s not in serving]
    due = [s for s in rotated if s.retry_due(cooldown_s)]
    return serving + busy + due or rotated
