"""The options every remote backend shares (``RemoteOptions``): timeouts, polling, retries,
the facts to assume where an endpoint does not tell them, and SGLang's request settings."""

from __future__ import annotations

from dataclasses import dataclass

from inference.remote.scheduling import GatewayClasses


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
    context_length: int | None = None
    """The served context length where the endpoint does not say (SGLang's gateway in front of
    0.5.23 workers tells none); what an endpoint reports wins."""
    max_running: int | None = None
    """Requests one server (or each worker behind a gateway) decodes at once, where it does not
    say; what an endpoint reports wins."""
    deadline_priority: bool = True
    """SGLang: each request's deadline is sent as its ``priority`` to a server that schedules
    by priority (``scheduling``); never to one that does not."""
    slo_headers: bool = False
    """Send llm-d's SLO headers (``x-llm-d-slo-ttft-ms``, ``x-llm-d-slo-tpot-ms``) from each
    request's plan."""
    gateway_classes: GatewayClasses | None = None
    """Send SMG's ``x-smg-priority`` class from each request's slack, by this mapping."""
    incremental: bool = False
    """SGLang: the servers run with ``--incremental-streaming-output``."""
    stream_interval: int | None = None
    """SGLang: sent as ``sampling_params.stream_interval`` when set: the server streams the
    first token at once, then a chunk every ``stream_interval`` tokens (None: the server's own
    ``--stream-interval``, 1 unless set)."""

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
        for name in ("context_length", "max_running", "stream_interval"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
