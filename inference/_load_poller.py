"""Load snapshots of SGLang endpoints, refreshed in the background, read on the request path.

Each endpoint has an ``EndpointState``. ``poll(client)`` refreshes it: while the endpoint is up,
``GET /v1/loads`` (running and waiting requests, summed over data-parallel ranks) and
``GET /metrics`` (the TTFT and inter-token-latency histograms; optional: a server without
``--enable-metrics`` just leaves them unknown). A failed ``/v1/loads`` (falling back to the
``/metrics`` queue gauge) takes the endpoint down; while it is down, ``poll`` only probes
``/health`` and brings it back on a 200. Nothing here is awaited by a request: the router reads
``state.snapshot``, a frozen value replaced whole by each poll.

The TTFT and ITL are the recent ones: the histogram's sum and count differences since the last
poll that saw new requests (the lifetime mean until then).
"""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass, replace
from typing import Any

import httpx

log = logging.getLogger(__name__)

_SAMPLE = re.compile(r"^(sglang:[A-Za-z0-9_]+)(?:\{[^}]*\})?\s+(\S+)")


@dataclass(frozen=True)
class LoadSnapshot:
    running: int = 0
    waiting: int = 0
    ttft_ms: float | None = None
    """Recent mean time to first token, None until the server has reported one."""
    itl_ms: float | None = None
    """Recent mean inter-token latency, None until reported."""
    at: float = 0.0
    """``time.monotonic()`` of the poll; 0 for never polled."""

    @property
    def predicted_ttft_ms(self) -> float | None:
        """The recent TTFT, stretched by the queue ahead: waiting requests per running slot."""
        if self.ttft_ms is None:
            return None
        return self.ttft_ms * (1.0 + self.waiting / max(self.running, 1))

    def predicted_ms(self, max_tokens: int) -> float | None:
        """First token plus ``max_tokens - 1`` more; None while either latency is unknown."""
        ttft = self.predicted_ttft_ms
        if ttft is None or self.itl_ms is None:
            return None
        return ttft + self.itl_ms * max(max_tokens - 1, 0)


class EndpointState:
    """One endpoint's health and latest load, owned by the router."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.up = True
        self.down_reason = ""
        self.snapshot = LoadSnapshot()
        self.in_flight = 0
        """Requests this process is streaming from it now (known without polling)."""
        self._ttft_total: tuple[float, float] | None = None
        self._itl_total: tuple[float, float] | None = None

    def mark_down(self, reason: str) -> None:
        if self.up:
            log.warning("routing: %s taken out: %s", self.url, reason)
        self.up = False
        self.down_reason = reason

    def mark_up(self) -> None:
        if not self.up:
            log.info("routing: %s back in", self.url)
        self.up = True
        self.down_reason = ""

    async def poll(self, client: httpx.AsyncClient, timeout: httpx.Timeout) -> None:
        """One refresh; never raises for the endpoint's failures."""
        if not self.up:
            try:
                health = await client.get(self.url + "/health", timeout=timeout)
            except httpx.HTTPError:
                return
            if health.status_code != 200:
                return
            self.mark_up()
        try:
            metrics = await _get_metrics(client, self.url + "/metrics", timeout)
            running, waiting = await _get_loads(client, self.url + "/v1/loads", timeout, metrics)
        except (httpx.HTTPError, ValueError) as exc:
            self.mark_down(f"load poll failed: {type(exc).__name__}: {exc}")
            return
        ttft = self._recent(metrics, "time_to_first_token_seconds", "_ttft_total")
        itl = self._recent(metrics, "inter_token_latency_seconds", "_itl_total")
        old = self.snapshot
        self.snapshot = replace(
            old,
            running=running,
            waiting=waiting,
            ttft_ms=old.ttft_ms if ttft is None else ttft,
            itl_ms=old.itl_ms if itl is None else itl,
            at=time.monotonic(),
        )

    def _recent(self, metrics: dict[str, float], name: str, attr: str) -> float | None:
        total = metrics.get(f"sglang:{name}_sum"), metrics.get(f"sglang:{name}_count")
        if total[0] is None or total[1] is None:
            return None
        now: tuple[float, float] = (total[0], total[1])
        before: tuple[float, float] | None = getattr(self, attr)
        if before is not None and now[1] < before[1]:
            before = None  # the server restarted: its counters began again
        d_sum, d_count = (now[0] - before[0], now[1] - before[1]) if before else now
        if d_count <= 0:
            return None
        setattr(self, attr, now)
        return d_sum / d_count * 1000.0


async def _get_metrics(
    client: httpx.AsyncClient, url: str, timeout: httpx.Timeout
) -> dict[str, float]:
    """``sglang:`` samples summed over their label sets; empty without ``--enable-metrics``."""
    try:
        response = await client.get(url, timeout=timeout)
    except httpx.HTTPError:
        return {}
    if response.status_code != 200:
        return {}
    samples: dict[str, float] = {}
    for line in response.text.splitlines():
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


async def _get_loads(
    client: httpx.AsyncClient, url: str, timeout: httpx.Timeout, metrics: dict[str, float]
) -> tuple[int, int]:
    """Running and waiting requests from ``/v1/loads`` (older servers: ``/get_load``), else
    from the ``/metrics`` gauges."""
    response = await client.get(url, timeout=timeout)
    if response.status_code == 404:
        response = await client.get(url.removesuffix("/v1/loads") + "/get_load", timeout=timeout)
    if response.status_code == 200:
        body: Any = response.json()
        loads = body.get("loads") if isinstance(body, dict) else body
        if isinstance(loads, list):
            running = sum(_count(x, "num_running_reqs") for x in loads)
            waiting = sum(_count(x, "num_waiting_reqs") for x in loads)
            return running, waiting
        raise ValueError("/v1/loads answered without a loads list")
    if "sglang:num_queue_reqs" in metrics:
        running = int(metrics.get("sglang:num_running_reqs", 0.0))
        return running, int(metrics["sglang:num_queue_reqs"])
    raise ValueError(f"load answered {response.status_code} and /metrics has no queue gauge")


def _count(load: Any, key: str) -> int:
    value = load.get(key) if isinstance(load, dict) else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0
