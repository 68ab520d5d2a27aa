"""One model of each remote endpoint: its state (up, busy, draining, down, and why), what it
told us when it joined (context length, batch size) and its latest load.

``EndpointState`` is the only place an endpoint's health lives: a request that fails marks it
(``mark_down`` for a server's fault, ``mark_busy`` for a full queue; a request's own error
marks nothing), and the background poll of its backend (``HTTPStreamBackend.poll_once``)
moves it back and refreshes its load. Nothing here waits on the network; the request path
only reads. ``RemoteOptions`` carries the options every remote backend shares.
"""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from inference.backend import TargetLoad

log = logging.getLogger(__name__)

_SAMPLE = re.compile(r"^(sglang:[A-Za-z0-9_]+)(?:\{[^}]*\})?\s+(\S+)")


@dataclass(frozen=True)
class RemoteOptions:
    """What every remote backend (SGLang, OpenAI-compatible, each routed pool) is run with."""

    connect_timeout_s: float = 2.0
    stall_timeout_s: float = 10.0
    """No byte for this long, the first token included: the server is stalled."""
    health_timeout_s: float = 5.0
    """For readiness and load polls; above SGLang's ``/health`` floor of 1 s."""
    poll_interval_s: float | None = 2.0
    """Seconds between background polls of every endpoint; None: only at ``start()``."""
    cooldown_s: float = 5.0
    """A down endpoint is tried again by a request (last) after this long, poll or not."""
    busy_s: float = 1.0
    """A busy endpoint (queue full) goes behind the others for this long."""
    max_attempts: int | None = None
    """Endpoints tried per request before the first token; None: each once."""
    min_output_tokens: int = 4
    """The fewest output tokens worth sending when the context length caps the output."""
    priority: int | None = None
    """SGLang: sent as ``priority`` when set."""
    incremental: bool = False
    """SGLang: the servers run with ``--incremental-streaming-output``."""

    def __post_init__(self) -> None:
        for name in ("connect_timeout_s", "stall_timeout_s", "health_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if self.poll_interval_s is not None and self.poll_interval_s <= 0:
            raise ValueError("poll_interval_s must be > 0 or None")
        if self.cooldown_s < 0 or self.busy_s < 0:
            raise ValueError("cooldown_s and busy_s must be >= 0")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.min_output_tokens < 1:
            raise ValueError("min_output_tokens must be >= 1")


class Health(StrEnum):
    UP = "up"
    BUSY = "busy"
    """Its queue is full: it refused a request, it is not broken."""
    DRAINING = "draining"
    """It was up and now says it is not ready (stopping): no new requests."""
    DOWN = "down"
    """Unreachable, a 5xx, a stall, or not started yet."""


class EndpointState:
    """One endpoint's health, facts and load; see the module docstring."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.health = Health.DOWN
        self.reason = "not polled yet"
        self.changed_at = 0.0
        self.joined = False
        """Whether its facts (context length, batch size) were read since it last came up."""
        self.context_length: int | None = None
        self.max_running: int | None = None
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
        """The context length and batch size from ``/model_info`` and ``/server_info`` bodies
        (or an OpenAI ``/models`` list's ``max_model_len``); unknown keys are ignored."""
        for body in bodies:
            if not isinstance(body, dict):
                continue
            data = body.get("data")
            cards = data if isinstance(data, list) else [body]
            for card in cards:
                if not isinstance(card, dict):
                    continue
                for key in ("context_length", "max_model_len", "max_context_length"):
                    value = _positive(card.get(key))
                    if value is not None:
                        self.context_length = value
                        break
                running = _positive(card.get("max_running_requests"))
                if running is not None:
                    self.max_running = running
        self.joined = True

    def read_load(self, loads: Any, metrics: dict[str, float]) -> None:
        """One ``/v1/loads`` body (summed over data-parallel ranks) and ``/metrics`` samples.

        From SGLang's gateway, ``/v1/loads`` lists one ``{"worker", "load"}`` per worker and no
        request counts (sgl-model-gateway ``src/core/worker_manager.rs``): the running and
        waiting requests are then the pool's totals of its workers' ``sglang:num_running_reqs``
        and ``sglang:num_queue_reqs`` (``/engine_metrics``), and the pool runs as many batches
        as it has workers."""
        entries = loads.get("loads") if isinstance(loads, dict) else None
        if not isinstance(entries, list):
            raise ValueError("/v1/loads answered without a loads list")
        ttft = self._recent(metrics, "time_to_first_token_seconds", "_ttft_total")
        itl = self._recent(metrics, "inter_token_latency_seconds", "_itl_total")
        workers = [x for x in entries if isinstance(x, dict) and "worker" in x]
        if entries and len(workers) == len(entries):  # a gateway's list of its workers
            running = int(metrics.get("sglang:num_running_reqs", 0.0))
            waiting = int(metrics.get("sglang:num_queue_reqs", 0.0))
            capacity = None if self.max_running is None else self.max_running * len(workers)
        else:
            running = sum(_count(x, "num_running_reqs") for x in entries)
            waiting = sum(_count(x, "num_waiting_reqs") for x in entries)
            capacity = self.max_running
        self.load = TargetLoad(
            running=running, waiting=waiting, max_running=capacity, ttft_ms=ttft, itl_ms=itl
        )
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

    # -- what the router predicts --------------------------------------------------------------

    def predicted_ms(self, max_tokens: int) -> float | None:
        """The recent TTFT (SGLang's, which already includes its queue wait: counted once)
        plus ``max_tokens - 1`` inter-token gaps; None while either is unknown."""
        if self.ttft_ms is None or self.itl_ms is None:
            return None
        return self.ttft_ms + self.itl_ms * max(max_tokens - 1, 0)


def parse_metrics(text: str) -> dict[str, float]:
    """``sglang:`` samples summed over their label sets."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match is None:
            continue
        try:
            value = float(match.group(2))
        except ValueError:
            continue
        if math.isfinite(value):
            samples[match.group(1)] = samples.get(match.group(1), 0.0) + value
    return samples


def _positive(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _count(load: Any, key: str) -> int:
    value = load.get(key) if isinstance(load, dict) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
