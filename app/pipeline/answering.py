"""The answer half of a question: generation and the answer's moderation as one stream.

The model's text streams through the answer filter (redaction, profanity) as it comes, inside
the generate stage's span (``BudgetSession.generating``: generation's own entry); what the filter
still holds is released by the moderate.answer stage once generation ends, through the session
like any stage. An answer with no token before the deadline is the 504, and so is one the
deadline cut before it had the fewest tokens a plan gives an answer (``RAGTIME_MIN_OUTPUT_TOKENS``,
or the caller's smaller cap): a few words are not a useful answer, and a 200 would say they were
(a stream has sent them: its error event says so). One that ended on its own teaches the cost
model its target's prefill and decode.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from app.pipeline.events import (
    AnswerDelta,
    AnswerDone,
    AnswerEvent,
    AnswerOutcome,
    Prepared,
    finish_reason,
)
from app.pipeline.services import Services
from app.stages import Generated
from app.stages.generation import record_first_token, record_generation_end, urgency
from inference import RouteDecision
from tracing.budget import DeadlinePassed, StageName


class Answering:
    """A prepared question's answer, from the services' stages."""

    def __init__(self, services: Services) -> None:
        self.stages = services.stages
        self.ttft_target_ms = services.settings.ttft_target_ms
        self.least_tokens = services.settings.min_output_tokens
        """The fewest tokens of a useful answer: what the smallest plan gives one."""

    async def stream_events(self, prepared: Prepared) -> AsyncGenerator[AnswerEvent, None]:
        """Moderated ``AnswerDelta`` events, then one ``AnswerDone`` with the outcome."""
        session, plan, stages = prepared.session, prepared.plan, self.stages
        answer_filter = stages.moderate_answer.open()
        text: list[str] = []
        generated_text: list[str] = []  # as the model wrote it, before the answer filter
        ttft_ms: float | None = None
        generated: Generated | None = None
        error: BaseException | None = None
        attributes = stages.generate.span_attributes(plan.max_output_tokens)
        with session.generating(**attributes) as span:
            try:
                events = stages.generate.generate_answer(
                    prepared.prompt,
                    max_tokens=plan.max_output_tokens,
                    target=plan.target,
                    deadline=session.deadline_for(StageName.GENERATE),
                    reserve_ms=session.generation_reserve_ms(),
                    stop_at=session.stop_at,
                    span=span,
                    urgency=urgency(session.serving_need()),
                )
                async with aclosing(events):
                    async for event in events:
                        if isinstance(event, Generated):
                            generated = event
                            break
                        if isinstance(event, RouteDecision):
                            session.routed(event.target, event.degradation, span)
                            continue
                        if ttft_ms is None:
                            session.first_token()
                            ttft_ms = session.spent_ms
                            target = session.ledger.ttft_target_ms or self.ttft_target_ms
                            record_first_token(span, ttft_ms, target)
                        generated_text.append(event.text)
                        released = answer_filter.feed(event.text)
                        if released:
                            text.append(released)
                            yield AnswerDelta(released)
                assert generated is not None, "the generate stage ends with its result"
                session.generation_ended(
                    generated, span, shared_prefix_tokens=stages.assemble.shared_prefix_tokens
                )
                if generated.finish_reason in ("deadline", "yielded"):
                    self.check_useful(generated, "".join(generated_text), plan.max_output_tokens)
                tail = await session.run(
                    StageName.MODERATE_ANSWER,
                    lambda _: stages.moderate_answer.moderate_tail(answer_filter),
                    spent_before_ms=answer_filter.elapsed_ms,
                )
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
                    ttft_ms=ttft_ms,
                    redactions=dict(answer_filter.redactions),
                )
                record_generation_end(
                    span, outcome.finish_reason, ttft_ms, outcome.usage, answer_filter.elapsed_ms
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
