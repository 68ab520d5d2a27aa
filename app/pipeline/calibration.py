"""Calibration probes: a short generation request sent to one serving target.

The budget engine (``tracing.budget.calibration``) decides when to calibrate and what the
timings mean; this module makes the requests, through the target's own backend, so the engine
needs nothing from ``inference``. Each probe's prompt is made of random hex words, fresh every
time, so that no prefix cache can serve it. A probe is due at once (``PROBE_DUE_S``): a
server that schedules by deadline serves it first, so that it times the server's pace, not the
requests it would otherwise wait behind or be preempted by.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from contextlib import aclosing

from inference import AssembledPrompt, GenerationBackend, GenerationDone, TextDelta, Urgency
from tracing.budget import Probe, ProbeResult

#: A probe's deadline, from when it is sent: sooner than any request's.
PROBE_DUE_S = 0.5


def fresh_prompt(backend: GenerationBackend, tokens: int) -> AssembledPrompt:
    """A prompt of about ``tokens`` tokens that no cache has seen."""
    words: list[str] = []
    ids: list[int] = []
    while len(ids) < tokens:
        words.extend(secrets.token_hex(3) for _ in range(max(tokens // 2, 4)))
        ids = backend.tokenizer.encode(" ".join(words))
    text = " ".join(words)
    return AssembledPrompt(
        text=text,
        token_ids=ids[:tokens],
        prompt_tokens=min(len(ids), tokens),
        passages=[],
        dropped=0,
        context_tokens_budget=0,
        context_tokens_used=0,
    )


def probe_for(backend: GenerationBackend) -> Probe:
    """A ``Probe`` that times one request to ``backend`` (a single-target backend)."""

    async def probe(prompt_tokens: int, max_tokens: int) -> ProbeResult:
        prompt = fresh_prompt(backend, prompt_tokens)
        started = time.perf_counter()
        first_at: float | None = None
        done: GenerationDone | None = None
        urgency = Urgency(started + PROBE_DUE_S, 0.0, 0.0, max_tokens)
        events = backend.stream(prompt, max_tokens=max_tokens, temperature=0.0, urgency=urgency)
        async with aclosing(events):
            async for event in events:
                if isinstance(event, TextDelta) and first_at is None:
                    first_at = time.perf_counter()
                elif isinstance(event, GenerationDone):
                    done = event
        ended = time.perf_counter()
        if done is None or first_at is None:
            raise RuntimeError("the probe got no answer")
        return ProbeResult(
            prompt_tokens=done.usage.prompt_tokens or prompt.prompt_tokens,
            cached_tokens=done.usage.cached_tokens,
            ttft_ms=(first_at - started) * 1000.0 - done.queue_ms,
            output_tokens=done.usage.completion_tokens,
            total_ms=(ended - started) * 1000.0 - done.queue_ms,
        )

    return probe


def probes(backend: GenerationBackend) -> Mapping[str, Probe]:
    """A probe for each target of ``backend`` that is up now (none for llama.cpp)."""
    return {target: probe_for(b) for target, b in backend.probe_backends().items()}


def reported_itl_ms(backend: GenerationBackend, target: str) -> float | None:
    load = backend.target_load(target)
    return load.itl_ms if load is not None else None
