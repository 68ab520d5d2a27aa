"""What the simulated SGLang server is launched with (``SimConfig``): its timings, its batch
and queue, how it orders the queue, what it reports of itself, and its fail modes, each named
after the SGLang launch flag it stands for."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SimConfig:
    model: str = "fake/tiny-chat"
    ttft_s: float = 0.0
    """The fixed part of the time to first token, once a request runs."""
    prefill_s_per_token: float = 0.0
    """Added to the TTFT per prompt token not served from the prefix cache."""
    itl_s: float = 0.0
    """Decode time per token after the first."""
    natural_tokens: int = 12
    tokens_per_chunk: int = 1
    """The server's ``--stream-interval``: a request's ``sampling_params.stream_interval``
    overrides it (``_streams_now``)."""
    incremental: bool = False
    max_running: int = 64
    """The running batch (``--max-running-requests``, or what the memory allows); more wait."""
    queue_capacity: int | None = None
    """``--max-queued-requests``: waiting requests beyond it are aborted with 503."""
    priority_scheduling: bool = False
    """``--enable-priority-scheduling``: the queue is served by ``priority`` (``queueing``)."""
    low_priority_values_first: bool = False
    """``--schedule-low-priority-values-first``."""
    priority_preemption: bool = True
    """False: ``--disable-priority-preemption``."""
    preemption_threshold: int = 10
    """``--priority-scheduling-preemption-threshold``."""
    abort_on_priority_when_disabled: bool = False
    """``--abort-on-priority-when-disabled``: a ``priority`` without priority scheduling is
    aborted with 503."""
    slow_factor: float = 1.0
    """Every timing is this many times longer: an engine slower than configured, without
    notice to its clients (``POST /bench/pace`` changes it while it serves)."""
    context_length: int = 8192
    """The served context length (``--context-length``, or the model's)."""
    launch_args: bool = False
    """Whether ``--context-length`` and ``--max-running-requests`` were given at launch: only
    then does ``/server_info`` report them (else ``None``)."""
    abort_on_disconnect: bool = True
    """0.5.23: a client that closes its stream aborts its request. False: older releases."""
    healthy: bool = True
    has_ready: bool = True
    """Whether ``/ready`` exists (older servers: 404, only the slow ``/health``)."""
    health_s: float = 1.0
    """How long ``/health`` takes: it generates a token and waits at least 1 s."""
    start_together: int | None = None
    """Hold each running request before its prefill until this many run at once (or 30 s
    passed): a test's proof that a client sends that many at once, whatever the machine's
    speed."""
    missing_routes: tuple[str, ...] = ()
    """Paths answered 404, as by a release without them (``/v1/loads`` before 0.5)."""
    reject_status: int | None = None
    error_after: int | None = None
    """The stream breaks (the connection ends mid-body) after this many tokens."""
    stall_after: int | None = None
    server_abort_after: int | None = None
    server_abort_status: int = 503
