"""The generation stages: assemble the prompt within its token budget, then stream the answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace

import numpy as np
from opentelemetry import trace
from opentelemetry.trace import Span

from app.stages.attribution import StoredRows, stored_chunk
from app.stages.generated import Generated
from app.stages.result import StageResult
from app.stages.threads import StageThreads
from inference import (
    AssembledPrompt,
    BackendUnavailable,
    GenerationBackend,
    GenerationDone,
    GenerationFailed,
    InferenceError,
    Penalties,
    PromptAssembler,
    RouteDecision,
    TextDelta,
    Urgency,
    Usage,
    common_prefix,
)
from inference.backend import SERVER_PENALTIES
from inference.prompt import NO_PASSAGES_BLOCK, ContextPassage, PromptLayout
from inference.repetition import NoStop, RepetitionStop, StopReason
from retrieval.store.sentences import scored_pieces
from tracing.budget import (
    Allowance,
    GenerationAllowance,
    ServingNeed,
    StageName,
    next_before_deadline,
)

#: A question of typical length, for measuring what a prompt holds besides its passages.
TYPICAL_QUESTION = "How do I give a parameter of a function a default value?"


@dataclass(frozen=True)
class Assembled(StageResult):
    """The prompt, with what was packed into it and what was left out."""

    prompt: AssembledPrompt
    shared_prefix_tokens: int | None = None
    """The leading tokens every prompt shares (``AssemblePrompt.shared_prefix_tokens``)."""

    def attributes(self) -> dict[str, int | bool]:
        prompt = self.prompt
        return {
            "ragtime.prompt.tokens": prompt.prompt_tokens,
            "ragtime.prompt.passages": len(prompt.passages),
            "ragtime.prompt.dropped": prompt.dropped,
            "ragtime.prompt.truncated": any(p.truncated for p in prompt.passages),
            "ragtime.prompt.pruned": prompt.pruned,
            "ragtime.prompt.context_tokens_budget": prompt.context_tokens_budget,
            "ragtime.prompt.context_tokens_used": prompt.context_tokens_used,
        }


@dataclass(frozen=True)
class Packing:
    """What a prompt is assembled from: the question, its screened passages, and its vector
    (which pruning weighs sentences by; None for a query embedded by no one)."""

    question: str
    passages: Sequence[ContextPassage]
    vector: np.ndarray | None = None


class AssemblePrompt:
    """Packs the passages into the prompt, within ``context_tokens`` of the served model's
    tokenizer. Warmed up after the generation backend has started (its tokenizer counts)."""

    name = StageName.ASSEMBLE
    component = "generator"

    def __init__(
        self,
        backend: GenerationBackend,
        threads: StageThreads,
        *,
        context_tokens: int,
        layout: PromptLayout,
        stored_rows: StoredRows = lambda collection, chunk_id: None,
    ) -> None:
        self.backend = backend
        self.threads = threads
        self.context_tokens = context_tokens
        self.layout = layout
        self.stored_rows = stored_rows
        """A chunk's sentence vectors, as ingest kept them (``DocumentStore.sentence_rows``):
        what pruning scores a passage's sentences with."""
        self.assembler: PromptAssembler | None = None
        self.shared_prefix_tokens: int | None = None
        """The tokens every prompt starts with (system prompt, template): what a new question
        can count on finding in a prefix cache."""
        self.overhead_tokens: int | None = None
        """The tokens a prompt holds besides its passages (system prompt, template, a typical
        question), measured with the served model's tokenizer: what the budget plans with."""

    async def warm_up(self) -> None:
        """Needs the backend's tokenizer only: a remote backend may still be waiting for its
        servers (requests are refused until it is ``loaded``)."""
        assembler = PromptAssembler(
            self.backend.tokenizer, context_tokens=self.context_tokens, layout=self.layout
        )
        one = assembler.assemble("What is one thing?", []).token_ids
        other = assembler.assemble("Why another?", []).token_ids
        typical = assembler.assemble(TYPICAL_QUESTION, []).prompt_tokens
        self.overhead_tokens = typical - assembler.tokenizer.count(NO_PASSAGES_BLOCK)
        self.assembler, self.shared_prefix_tokens = assembler, common_prefix(one, other)

    @property
    def ready(self) -> bool:
        return self.assembler is not None

    async def run(self, packing: Packing, allowance: Allowance) -> Assembled:
        """The prompt within the plan's context tokens; pruned to the sentences closest to the
        question when the plan says so."""
        plan = allowance.planned
        return await self.assemble_prompt(
            packing.question,
            packing.passages,
            context_tokens=plan.context_tokens,
            deadline=allowance.deadline,
            prune_for=packing.vector if plan.prune else None,
        )

    async def assemble_prompt(
        self,
        question: str,
        passages: Sequence[ContextPassage],
        *,
        context_tokens: int,
        deadline: float,
        prune_for: np.ndarray | None = None,
    ) -> Assembled:
        """The prompt within ``context_tokens``; with ``prune_for`` (the question's unit
        vector), the passages pruned to their sentences closest to it."""
        if self.assembler is None:
            raise BackendUnavailable("the generation backend is not loaded")
        prompt = await self.threads.call(
            self.assemble, question, passages, context_tokens, prune_for, deadline=deadline
        )
        return Assembled(prompt, self.shared_prefix_tokens)

    def assemble(
        self,
        question: str,
        passages: Sequence[ContextPassage],
        context_tokens: int,
        prune_for: np.ndarray | None = None,
    ) -> AssembledPrompt:
        """``assemble_prompt``'s work, on the caller's thread (after ``warm_up``)."""
        assembler = self.assembler
        if assembler is None:
            raise BackendUnavailable("the generation backend is not loaded")
        pieces = None
        if prune_for is not None:
            pieces = [scored_pieces(p.text, self._rows_of(p), prune_for) for p in passages]
        return assembler.assemble(question, passages, context_tokens=context_tokens, pieces=pieces)

    def _rows_of(self, passage: ContextPassage) -> np.ndarray | None:
        found = stored_chunk(passage)
        return None if found is None else self.stored_rows(*found)


GenerateEvent = TextDelta | RouteDecision | Generated


class Generate:
    """Streams the answer from the generation backend until it ends, the deadline passes, or
    ``stop_at()`` (another request needing the time) comes first.

    ``run()`` yields the backend's ``TextDelta`` and ``RouteDecision`` events, then one
    ``Generated``. A failure raises an ``InferenceError``: ``BackendUnavailable`` before the
    first text, ``GenerationFailed`` after it. Closing the stream early closes the backend's,
    which stops decoding. ``penalties`` go to the backend with every request. With
    ``stop_on_repetition`` (unless the backend writes filler), the text passes through an
    ``inference.repetition.RepetitionStop``, which holds back what may turn out to be a loop's
    last turn or a new question, and the answer ends (the backend's stream closed) when it
    says so.
    """

    name = StageName.GENERATE
    component = "generator"

    def __init__(
        self,
        backend: GenerationBackend,
        *,
        temperature: float,
        penalties: Penalties = SERVER_PENALTIES,
        stop_on_repetition: bool = True,
        token_delay_ms: float = 0.0,
    ) -> None:
        self.backend = backend
        self.temperature = temperature
        self.penalties = penalties
        self.stop_on_repetition = stop_on_repetition and not backend.filler
        self.token_delay_ms = token_delay_ms
        """A fault for benches and tests: a slower model, per streamed piece."""

    async def warm_up(self) -> None:
        await self.backend.start()

    def span_attributes(self, max_tokens: int) -> dict[str, str | int | float]:
        """The generate span's request attributes (OpenTelemetry's GenAI conventions), with
        each penalty set (``ragtime.request.repeat_penalty``: the conventions have none)."""
        penalties = self.penalties
        set_ones = {
            "ragtime.request.repeat_penalty": penalties.repeat,
            "gen_ai.request.frequency_penalty": penalties.frequency,
            "gen_ai.request.presence_penalty": penalties.presence,
        }
        return {
            "gen_ai.operation.name": "text_completion",
            "gen_ai.system": self.backend.name,
            "gen_ai.request.model": self.backend.model,
            "gen_ai.request.max_tokens": max_tokens,
            "gen_ai.request.temperature": self.temperature,
            **{key: value for key, value in set_ones.items() if value is not None},
        }

    async def run(
        self, assembled: Assembled, allowance: GenerationAllowance
    ) -> AsyncGenerator[str | Generated, None]:
        """The answer's text as it comes, then its ``Generated``: the plan's tokens at its
        target, within the allowance; where it went, and what was given up to send it there,
        told to the allowance."""
        events = self.generate_answer(
            assembled.prompt,
            max_tokens=allowance.max_tokens,
            target=allowance.target,
            deadline=allowance.deadline,
            reserve_ms=allowance.reserve_ms,
            stop_at=allowance.stop_at,
            span=allowance.span,
            urgency=urgency(allowance.need),
        )
        async with aclosing(events):
            async for event in events:
                if isinstance(event, RouteDecision):
                    allowance.routed(event.target, event.degradation)
                elif isinstance(event, Generated):
                    yield replace(event, shared_prefix_tokens=assembled.shared_prefix_tokens)
                else:
                    yield event.text

    async def generate_answer(
        self,
        prompt: AssembledPrompt,
        *,
        max_tokens: int,
        target: str,
        deadline: float,
        reserve_ms: float = 0.0,
        stop_at: Callable[[], float | None] = lambda: None,
        span: Span | None = None,
        urgency: Urgency | None = None,
    ) -> AsyncGenerator[GenerateEvent, None]:
        """``target`` is where the plan sends the request (a ``RouteDecision`` says where it
        went); ``reserve_ms`` is kept before ``deadline`` to finish the answer; ``span``,
        when given, is current while the backend's stream is opened (a remote backend
        propagates it); ``urgency`` is what a serving layer that schedules by it is told."""
        started = time.perf_counter()
        first_at = last_at = None
        texts: list[str] = []  # as the backend wrote them
        watch = RepetitionStop() if self.stop_on_repetition else NoStop()
        stopped: StopReason = "repetition"  # what the watch said, once it says to stop
        load = self.backend.target_load(target)
        free = load is not None and not load.waiting and load.running < (load.max_running or 1)

        def cut_short(reason: str, stopped_on: StopReason | None = None) -> Generated:
            """An answer that ends before its backend said so (no usage comes)."""
            tokens = self.backend.tokenizer.count("".join(texts)) if texts else 0
            return Generated(
                reason,
                target,
                started,
                first_at,
                last_at=last_at,
                streamed_tokens=tokens,
                prompt_tokens=prompt.prompt_tokens,
                may_have_queued=not free,
                stopped_on=stopped_on,
            )

        with trace.use_span(span or trace.get_current_span(), end_on_exit=False):
            events = self.backend.stream(
                prompt,
                max_tokens=max_tokens,
                temperature=self.temperature,
                deadline=deadline,
                target=target,
                urgency=urgency,
                penalties=self.penalties,
            )
        try:
            async with aclosing(events):
                while True:
                    stop = stop_at()
                    event = await next_before_deadline(
                        events, deadline, reserve_ms=reserve_ms, stop_at=stop
                    )
                    if isinstance(event, RouteDecision):
                        target = event.target or target
                        yield event
                        continue
                    if isinstance(event, TextDelta):
                        last_at = time.perf_counter()
                        first_at = first_at or last_at
                        texts.append(event.text)
                        if self.token_delay_ms:
                            await asyncio.sleep(self.token_delay_ms / 1000.0)
                        verdict = watch.feed(event.text)
                        if verdict.text:
                            yield TextDelta(verdict.text)
                        if verdict.stop is None:
                            continue
                        stopped = verdict.stop
                        break  # out of the backend's stream, which closes it: decoding stops
                    if held := watch.flush():  # the end, or the deadline: what was held goes
                        yield TextDelta(held)
                    if isinstance(event, GenerationDone):
                        yield Generated(
                            event.finish_reason,
                            target,
                            started,
                            first_at,
                            event.usage,
                            event.queue_ms,
                        )
                        return
                    yielded = stop is not None and stop < deadline
                    yield cut_short("yielded" if yielded else "deadline")
                    return
            if span is not None and span.is_recording():  # only a stop comes here
                span.set_attribute("ragtime.generate.stopped_on", stopped)
            yield cut_short("stop", stopped)
        except InferenceError:
            raise
        except Exception as exc:
            if first_at is None:
                raise BackendUnavailable(f"generation failed: {exc}") from exc
            raise GenerationFailed(f"generation failed mid-stream: {exc}") from exc


def record_generation_end(
    span: Span, finish_reason: str, ttft_ms: float | None, usage: Usage | None, inline_ms: float
) -> None:
    """How the answer ended, on the generate span: finish reason, TTFT, tokens, cache share,
    and the answer filter's inline work."""
    if not span.is_recording():
        return
    span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
    span.set_attribute("ragtime.moderation.inline_ms", round(inline_ms, 3))
    if ttft_ms is not None:
        span.set_attribute("ragtime.ttft_ms", round(ttft_ms, 3))
    if usage is not None:
        span.set_attributes(
            {
                "gen_ai.usage.input_tokens": usage.prompt_tokens,
                "gen_ai.usage.output_tokens": usage.completion_tokens,
                "ragtime.usage.cached_tokens": usage.cached_tokens,
                "ragtime.usage.cached_ratio": (
                    round(usage.cached_tokens / usage.prompt_tokens, 4)
                    if usage.prompt_tokens
                    else 0.0
                ),
            }
        )


def urgency(need: ServingNeed) -> Urgency:
    """The budget's ``ServingNeed`` as the backends take it."""
    return Urgency(need.deadline, need.first_token_ms, need.per_token_ms, need.output_tokens)
