"""The moderation stages: screen the question before any work, filter the answer as it streams."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from app.moderation import AnswerFilter, Moderator, QuestionRejected
from app.stages.batching import MicroBatcher
from app.stages.threads import StageThreads


@dataclass(frozen=True)
class Screened:
    """A question that passed the screen, with its score (0 clean, 1 abusive), and the batch it
    was scored in."""

    score: float
    batch_size: int = 1
    batch_wait_ms: float = 0.0

    def attributes(self) -> dict[str, float | int]:
        return {
            "ragtime.moderation.score": round(self.score, 4),
            "ragtime.moderation.batch_size": self.batch_size,
            "ragtime.moderation.batch_wait_ms": round(self.batch_wait_ms, 3),
        }


class ScreenQuestion:
    """Scores the question with the moderation classifier, in one batch with the questions of
    concurrent requests; raises ``QuestionRejected`` at or above its threshold."""

    name = "moderate.question"
    component = "moderation"

    def __init__(self, moderator: Moderator, threads: StageThreads) -> None:
        self.moderator = moderator
        self.threads = threads
        self._batcher = MicroBatcher[str, float](moderator.scores, threads)

    async def warm_up(self) -> None:
        await asyncio.to_thread(self.moderator.load)

    async def run(self, question: str, *, deadline: float) -> Screened:
        batched = await self._batcher.run(question, deadline=deadline)
        if batched.value >= self.moderator.threshold:
            raise QuestionRejected(batched.value)
        return Screened(batched.value, batched.batch_size, batched.wait_ms)


@dataclass(frozen=True)
class ModeratedTail:
    """The end of a moderated answer: the text held back until now, and what was changed."""

    text: str
    redactions: dict[str, int] = field(default_factory=dict)
    inline_ms: float = 0.0
    """Time the filter spent on the streamed text, before this tail."""
    total_ms: float = 0.0
    """All the filter's time, this tail included."""

    def attributes(self) -> dict[str, float | int]:
        attributes: dict[str, float | int] = {
            "ragtime.moderation.inline_ms": round(self.inline_ms, 3),
            "ragtime.moderation.redactions": sum(self.redactions.values()),
        }
        for kind, count in self.redactions.items():
            attributes[f"ragtime.moderation.redacted.{kind}"] = count
        return attributes


class ModerateAnswer:
    """Redacts personal data and masks profanity in the answer: ``open()`` a filter that the
    generated text streams through, then ``run()`` it to release what it still holds."""

    name = "moderate.answer"
    component = "moderation"

    def __init__(self, moderator: Moderator) -> None:
        self.moderator = moderator

    async def warm_up(self) -> None:
        await asyncio.to_thread(self.moderator.load)

    def open(self) -> AnswerFilter:
        return self.moderator.answer_filter()

    async def run(self, answer_filter: AnswerFilter) -> ModeratedTail:
        inline_ms = answer_filter.elapsed_ms
        tail = answer_filter.flush()
        return ModeratedTail(
            tail, dict(answer_filter.redactions), inline_ms, answer_filter.elapsed_ms
        )
