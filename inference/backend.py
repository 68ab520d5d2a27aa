"""The generation backend contract: one small base class every backend implements.

In the spirit of httpx's ``BaseTransport``: a backend is built cheaply, loads in ``start()``,
releases in ``close()``, and answers one call, ``stream()``. In-process (llama.cpp) and remote
(SGLang over HTTP) backends plug in the same way; tests plug in a scripted one.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass

from inference.prompt import AssembledPrompt
from inference.tokenizer import PromptTokenizer


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    cached_tokens: int
    """Prompt tokens whose KV cache was reused from an earlier request (prefix caching)."""
    completion_tokens: int


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class GenerationDone:
    usage: Usage
    finish_reason: str
    """``"stop"`` (end of turn), ``"length"`` (``max_tokens`` hit) or ``"cancelled"``."""
    queue_ms: float
    """Time spent waiting for the backend before decoding began."""


@dataclass(frozen=True)
class Penalties:
    """What sampling does against repeating itself; each None is the backend's own (a remote
    server's default; llama.cpp's, ``LlamaCppBackend.repeat_penalty``), so that a remote
    server is sent only what was set. ``repeat`` divides the logit of every token among the
    last ones (llama.cpp's ``repeat_penalty``, SGLang's ``repetition_penalty``; 1 is none);
    ``frequency`` and ``presence`` subtract, per earlier occurrence and once, as OpenAI's
    ``frequency_penalty`` and ``presence_penalty`` do (0 is none)."""

    repeat: float | None = None
    frequency: float | None = None
    presence: float | None = None


SERVER_PENALTIES = Penalties()
"""Every penalty the backend's own."""


@dataclass(frozen=True)
class RouteDecision:
    """Which server and model take this request, and why.

    Yielded before the first ``TextDelta`` by a backend with several targets; one that fails
    over before the first token yields another, and the last one before the first delta is the
    one that served. Without one, the request's target is ``cost_target()``. ``target`` is the
    key the budget engine learns costs under (one per endpoint and model); ``degradation`` is
    ``(action, reason)`` when the backend chose to serve with less (a smaller model, to fit the
    time left).
    """

    target: str
    model: str
    pool: str = ""
    reason: str = ""
    detail: str = ""
    degradation: tuple[str, str] | None = None


@dataclass(frozen=True)
class TargetLoad:
    """What one serving target reports of its load and recent latency (``None``: unknown).

    ``running`` requests are being decoded now (for SGLang, its running batch), ``waiting`` are
    queued behind them. ``ttft_ms`` and ``itl_ms`` are the server's own recent means (SGLang's
    ``/metrics`` histograms, the difference between two polls); the server's TTFT already
    includes its queue wait. ``max_running`` is how many requests it decodes at once.
    """

    running: int = 0
    waiting: int = 0
    max_running: int | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None
    others: int | None = None
    """Requests it held at the last poll that were not this process's (its running and
    waiting, less this process's streams to it when the poll was sent); None: unknown."""
    earliest_deadline_first: bool = False
    """It serves its waiting requests by the deadline the caller tells (SGLang's priority
    scheduling, told each request's deadline as its ``priority``)."""
    preempts: bool = False
    """A waiting request with an earlier deadline takes a running one's slot."""


@dataclass(frozen=True)
class Urgency:
    """What a request's plan expects of the serving layer: its last token by ``deadline`` (a
    ``time.perf_counter()`` value, the stages after generation already kept), its first token
    ``first_token_ms`` after it starts and each next one ``per_token_ms`` later, for
    ``output_tokens`` tokens."""

    deadline: float
    first_token_ms: float
    per_token_ms: float
    output_tokens: int

    def left_ms(self, now: float | None = None) -> float:
        return (self.deadline - (time.perf_counter() if now is None else now)) * 1000.0

    @property
    def need_ms(self) -> float:
        """What the plan needs: the first token, then each one after it."""
        return self.first_token_ms + self.per_token_ms * max(self.output_tokens - 1, 0)

    def slack_ms(self, now: float | None = None) -> float:
        """The time left beyond what the plan needs."""
        return self.left_ms(now) - self.need_ms

    def slo_ms(self, now: float | None = None) -> tuple[float, float] | None:
        """The time to first token and per output token that together use the time left, in
        the proportion the plan predicts; None once the deadline has passed."""
        left = self.left_ms(now)
        if left <= 0:
            return None
        need = self.need_ms
        if need <= 0 or self.output_tokens <= 1:
            return left, left
        scale = left / need
        return self.first_token_ms * scale, self.per_token_ms * scale


GenerationEvent = TextDelta | GenerationDone | RouteDecision


class GenerationBackend(ABC):
    """Streams a completion of an assembled prompt.

    Contract of ``stream()``, an async generator:

    * a backend with more than one target (remote endpoints) yields a ``RouteDecision`` before
      each attempt (the last before the first delta is the one that served); then zero or more
      ``TextDelta`` and exactly one ``GenerationDone``;
    * it raises ``BackendUnavailable`` before the first delta and ``GenerationFailed`` after;
    * ``deadline`` (a ``time.perf_counter()`` value, or ``None``) is when the caller must have
      its answer; a backend may use it to choose a target, and stops producing past it;
    * if the consumer stops early (``aclose()`` on the generator, or its task is cancelled),
      the backend stops producing within a couple of tokens and is free for the next request.
      The ``GenerationDone`` of a cancelled request is not delivered.
    """

    name: str
    """The serving engine, for spans (``gen_ai.system``), e.g. ``"llama.cpp"``."""
    model: str
    """The model served, for spans (``gen_ai.request.model``)."""
    earliest_deadline_first: bool = False
    """Whether the backend serves its waiting requests earliest ``deadline`` first."""
    generation_waits: bool = True
    """Whether a request generating waits on the model (a worker or a server, whose queue the
    budget engine models per target); False for a backend that costs nothing but the service's
    own streaming, which admission then counts as the request's own work."""
    filler: bool = False
    """Whether its text is filler, not a model's (the null backend's), which nobody need
    watch for a model's faults such as repeating itself."""

    @property
    @abstractmethod
    def tokenizer(self) -> PromptTokenizer:
        """The model's tokenizer; available once ``start()`` has succeeded."""

    @property
    def loaded(self) -> bool:
        """Whether ``stream()`` can serve now."""
        return True

    def not_ready(self) -> str | None:
        """Why ``stream()`` cannot serve now, as far as the backend knows (None: it can, or it
        knows nothing more than that it has not loaded)."""
        return None

    @property
    def pending(self) -> int:
        """Requests this backend is decoding or holding in its queue (0 when it cannot tell)."""
        return 0

    @property
    def remote_slots(self) -> int:
        """Requests this backend's remote servers decode at once, summed over those serving (0
        for an in-process backend, or while no server has told): generation capacity outside
        this process, whose waiting requests cost it nothing but a connection."""
        return 0

    @property
    def context_length(self) -> int | None:
        """The serving model's context length, prompt and output together, where a server
        reports it (None: unknown, or an in-process model whose window the service checks)."""
        return None

    def cost_target(self, question: str = "") -> str:
        """The target a request for ``question`` would most likely be served by now: the key of
        the costs the budget engine plans it with."""
        return f"{self.name}:{self.model}"

    def cost_targets(self, question: str = "") -> list[str]:
        """Where an answer to ``question`` may go, the preferred first: the budget plans with
        each target's costs in turn, and sends the request to the first whose plan fits
        (``stream(..., target=...)``). One target here; a routed backend adds its smaller
        model's."""
        return [self.cost_target(question)]

    def target_model(self, target: str) -> str | None:
        """The model ``target`` (one of ``cost_targets``) serves: the budget weighs its plans
        with that model's quality curves. This backend's one model here; a routed backend
        names each pool's."""
        return self.model

    def probe_backends(self) -> Mapping[str, GenerationBackend]:
        """Single-target backends to calibrate, by target (only those up now).

        Empty for a backend whose costs are known in advance (llama.cpp on our CPU keeps the
        measured priors); a remote backend lists each endpoint, so that the budget engine can
        measure its fixed cost, prefill and decode rates with a short probe when it joins."""
        return {}

    def target_load(self, target: str) -> TargetLoad | None:
        """What ``target`` last reported of its load and latency; ``None`` when unknown."""
        return None

    async def start(self) -> None:  # noqa: B027 - an optional hook, like BaseTransport.close
        """Load the model or connect; heavy work belongs here, not in ``__init__``."""

    async def close(self) -> None:  # noqa: B027
        """Release the model, threads or connections."""

    def stream(
        self,
        prompt: AssembledPrompt,
        *,
        max_tokens: int,
        temperature: float = 0.0,
        deadline: float | None = None,
        target: str | None = None,
        urgency: Urgency | None = None,
        penalties: Penalties = SERVER_PENALTIES,
    ) -> AsyncGenerator[GenerationEvent, None]:
        """Generate at most ``max_tokens`` tokens after ``prompt.token_ids``: the events, as an
        async generator to iterate and close. ``deadline`` (a ``time.perf_counter()`` value)
        orders a backend's queue where it serves earliest deadline first; ``target``, one of
        ``cost_targets``, is where the budget planned the answer to go (None: the backend's own
        choice); ``urgency``, what the plan expects of a serving layer that schedules by it (a
        remote one: it is not sent once its deadline has passed); ``penalties``, against
        repeating itself (each unset one the backend's own). ``ValueError`` at once for
        ``max_tokens < 1``."""
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        return self._generate(
            prompt,
            max_tokens=max_tokens,
            temperature=temperature,
            deadline=deadline,
            target=target,
            urgency=urgency,
            penalties=penalties,
        )

    @abstractmethod
    def _generate(
        self,
        prompt: AssembledPrompt,
        *,
        max_tokens: int,
        temperature: float,
        deadline: float | None,
        target: str | None,
        urgency: Urgency | None = None,
        penalties: Penalties = SERVER_PENALTIES,
    ) -> AsyncGenerator[GenerationEvent, None]:
        """``stream``'s events, ``max_tokens`` checked: an async generator function, or a plain
        one that does its work in the caller's context and returns the events' generator."""
