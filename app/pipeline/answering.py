"""The answer half of a question: generation and the answer's moderation as one stream.

The model's text streams through the answer filter (redaction, profanity) as it comes, inside
the generate stage's span (``BudgetSession.generate``: generation's own entry); what the filter
still holds is released by the moderate.answer stage once generation ends, through the session
like any stage. An answer with no token before the deadline is the 504, and so is one the
deadline cut before it had the fewest tokens a plan gives an answer (``RAGTIME_MIN_OUTPUT_TOKENS``,
or the caller's smaller cap): a few words are not a useful answer, and a 200 would say they were
(a stream has sent them: its error event says so). One that ended on its own teaches the cost
model its target's prefill and decode.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from app.pipeline.events import (
    AnswerDelta,
    AnswerDone,
    AnswerEvent,
    AnswerOutcome,
    Prepared,
    finish_reason,
)
from app.stages import Generated, Stages
from app.stages.generation import record_generation_end
from tracing.budget import BudgetSession, DeadlinePassed


class Answering:
    """A prepared question's answer, from the services' stages."""

    def __init__(self, stages: Stages, *, least_tokens: int) -> None:
        self.stages = stages
        self.least_tokens = least_tokens
        """The fewest tokens of a useful answer: what the smallest plan gives one."""

    async def stream_events(
        self, prepared: Prepared, session: BudgetSession
    ) -> AsyncGenerator[AnswerEvent, None]:
        """Moderated ``AnswerDelta`` events, then one ``AnswerDone`` with the outcome."""
        stages = self.stages
        answer_filter = stages.moderate_answer.open()
        text: list[str] = []
        generated_text: list[str] = []  # as the model wrote it, before the answer filter
        generated: Generated | None = None
        error: BaseException | None = None
        async with session.generate(stages.generate, prepared.assembled) as generation:
            try:
                async for piece in generation:
                    generated_text.append(piece)
                    released = answer_filter.feed(piece)
                    if released:
                        text.append(released)
                        yield AnswerDelta(released)
                assert isinstance(generation.result, Generated), "the stage ends with its result"
                generated = generation.result
                if generated.finish_reason in ("deadline", "yielded"):
                    planned = prepared.plan.max_output_tokens
                    self.check_useful(generated, "".join(generated_text), planned)
                tail = await session.run(stages.moderate_answer, answer_filter)
                if tail.text:
                    text.append(tail.text)
                    yield AnswerDelta(tail.text)
            except BaseException as exc:
                error = exc
                raise
            finally:
                outcome = AnswerOutcome(
                    text="".join(text),
                    usage=generated.usage if generated is not None else None,
                    finish_reason=finish_reason(generated, error),
                    ttft_ms=generation.ttft_ms,
                    redactions=dict(answer_filter.redactions),
                    model=stages.generate.backend.model,
                )
                record_generation_end(
                    generation.span,
                    outcome.finish_reason,
                    outcome.ttft_ms,
                    outcome.usage,
                    answer_filter.elapsed_ms,
                )
        yield AnswerDone(outcome)

    def check_useful(self, generated: Generated, text: str, planned: int) -> None:
        """Raise ``DeadlinePassed`` for an answer the deadline cut before it was useful: no
        token at all, or fewer than the least a plan gives one (or than ``planned``, a caller's
        smaller cap). Its tokens are the backend's count, else those the generate stage
        counted with the served model's tokenizer (a stream cut short ends before its usage)."""
        if not text:
            raise DeadlinePassed("no answer token came before the deadline")
        usage = generated.usage
        tokens = usage.completion_tokens if usage is not None else generated.streamed_tokens
        least = min(self.least_tokens, planned)
        if tokens < least:
            raise DeadlinePassed(
                f"the deadline cut the answer after {tokens} tokens, fewer than the {least} a "
                "useful answer is given"
            )
