"""What a server reports of its load, read leniently: the ``sglang:`` samples of its Prometheus
text (``parse_metrics``), and the per-rank or per-worker entries of a ``/v1/loads`` body (SGLang's,
or its gateway's), with the counts in them. Anything missing or malformed reads as unknown (None,
or 0), never as an error: ``endpoints.EndpointState`` falls back to what the operator configured.
"""

from __future__ import annotations

import math
import re
from typing import Any

#: One Prometheus sample line of an ``sglang:`` series: its name (labels dropped) and its value.
SAMPLE = re.compile(r"^(sglang:[A-Za-z0-9_]+)(?:\{[^}]*\})?\s+(\S+)")


def parse_metrics(text: str) -> dict[str, float]:
    """``sglang:`` samples summed over their label sets."""
    samples: dict[str, float] = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match is None:
            continue
        try:
            value = float(match.group(2))
        except ValueError:
            continue
        if math.isfinite(value):
            samples[match.group(1)] = samples.get(match.group(1), 0.0) + value
    return samples


def positive_int(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def count_in(load: Any, key: str) -> int:
    value = load.get(key) if isinstance(load, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return int(value)
    return 0  # absent, or -1: unknown


def label_count(value: Any) -> int | None:
    """A positive count, given as a number or as a label's string (``"4096"``)."""
    return positive_int(int(value) if isinstance(value, str) and value.isdigit() else value)


def load_entries(loads: Any) -> list[dict[str, Any]]:
    """The per-rank (or per-worker) entries of a loads body; empty when it has none."""
    entries = loads.get("loads") if isinstance(loads, dict) else None
    return [x for x in entries if isinstance(x, dict)] if isinstance(entries, list) else []


def summed_capacity(entries: list[dict[str, Any]]) -> int | None:
    """The summed ``max_running_requests`` of the entries when every one gives it (smg reports
    0 for a worker that did not say)."""
    batches = [positive_int(x.get("max_running_requests")) for x in entries]
    if batches and all(b is not None for b in batches):
        return sum(b for b in batches if b is not None)
    return None


def has_gauges(metrics: dict[str, float]) -> bool:
    return "sglang:num_running_reqs" in metrics or "sglang:num_queue_reqs" in metrics


def gauge_counts(metrics: dict[str, float]) -> tuple[int, int]:
    """Running and waiting requests from ``sglang:`` gauges, summed over their label sets."""
    return (
        int(metrics.get("sglang:num_running_reqs", 0.0)),
        int(metrics.get("sglang:num_queue_reqs", 0.0)),
    )
