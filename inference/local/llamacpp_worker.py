"""The worker-thread side of the llama.cpp backend: one request's decode loop and its mailbox."""

from __future__ import annotations

import asyncio
import codecs
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from inference.backend import GenerationDone, TextDelta, Usage
from inference.local.llamacpp_prefix import PrefixStates
from inference.prompt import common_prefix

END = object()
"""Posted when the worker is done with a job, whatever happened (also when it never ran)."""


@dataclass(eq=False)
class Job:
    """One request: what to decode, where to post events, and the flag that stops it."""

    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    loop: asyncio.AbstractEventLoop
    repeat_penalty: float = 1.0
    """llama.cpp's ``repeat_penalty`` (1: none); with the two below, as ``Llama.generate``
    takes them."""
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    events: asyncio.Queue[object] = field(default_factory=asyncio.Queue)
    cancel: threading.Event = field(default_factory=threading.Event)
    submitted: float = field(default_factory=time.perf_counter)
    closed: bool = False
    """Set when the backend shut down before the job was served."""
    deadline: float = math.inf
    """``time.perf_counter()`` value by which the request must be answered."""
    first_token_at: float | None = None
    """When the first text was posted (for the worker's least time to a first token)."""

    def emit(self, item: object) -> None:
        """Post ``item`` to the consumer's loop; safe from any thread."""
        if self.first_token_at is None and isinstance(item, TextDelta):
            self.first_token_at = time.perf_counter()
        try:
            self.loop.call_soon_threadsafe(self.events.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            self.cancel.set()


def decode(
    llm: Any,
    job: Job,
    queue_ms: float,
    *,
    seed: int,
    is_eog: Callable[[int], bool],
    states: PrefixStates | None = None,
) -> GenerationDone:
    """Decode ``job`` on ``llm``, posting a ``TextDelta`` per decodable piece of text. With
    ``states``, the KV state of a recent prompt that shares more with this one is restored
    first."""
    ids = job.prompt_ids
    n_ctx = llm.n_ctx()
    if not ids:
        raise ValueError("the prompt is empty")
    if len(ids) >= n_ctx:
        raise ValueError(f"a prompt of {len(ids)} tokens does not fit the {n_ctx}-token context")
    if job.cancel.is_set():  # the consumer left while the request was queued
        return GenerationDone(Usage(len(ids), 0, 0), "cancelled", queue_ms)
    budget = min(job.max_tokens, n_ctx - len(ids))
    if states is not None:
        states.prepare(llm, ids)
    # llama.cpp keeps the KV cache of the prefix shared with what it last evaluated
    # (``Llama._input_ids`` in 0.3.36) and re-evaluates at least the prompt's last token.
    evaluated = getattr(llm, "_input_ids", ())
    cached = min(common_prefix(list(evaluated), ids), len(ids) - 1)
    llm.set_seed(seed)
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    completion, finish = 0, "length"
    tokens = llm.generate(
        ids,
        temp=job.temperature,
        top_k=40,
        top_p=0.95,
        min_p=0.05,
        repeat_penalty=job.repeat_penalty,
        frequency_penalty=job.frequency_penalty,
        presence_penalty=job.presence_penalty,
    )
    try:
        for token in tokens:
            if is_eog(token):
                finish = "stop"
                break
            completion += 1
            piece = text.decode(llm.detokenize([token]))
            if piece:
                job.emit(TextDelta(piece))
            if job.cancel.is_set():
                finish = "cancelled"
                break
            if completion >= budget:
                break
    finally:
        tokens.close()
    tail = text.decode(b"", final=True)
    if tail and finish != "cancelled":
        job.emit(TextDelta(tail))
    return GenerationDone(Usage(len(ids), cached, completion), finish, queue_ms)
