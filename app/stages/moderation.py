"""The moderation stages: screen the question before any work, screen the retrieved passages for
instructions aimed at the model before they reach the prompt, filter the answer as it streams."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from opentelemetry.trace import Span

from app.safety.injection import Verdict, screen
from app.safety.moderation import AnswerFilter, Moderator, QuestionRejected
from app.safety.redaction import redaction_attributes
from app.stages.batching import MicroBatcher
from app.stages.recent import Recent
from app.stages.result import StageResult
from app.stages.threads import StageThreads
from retrieval import Passage
from tracing.budget import Allowance, StageName


@dataclass(frozen=True)
class Screened(StageResult):
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
    concurrent requests; raises ``QuestionRejected`` at or above its threshold. A question
    asked before (the same text) keeps its score: the classifier does not run again."""

    name = StageName.MODERATE_QUESTION
    component = "moderation"

    def __init__(
        self, moderator: Moderator, threads: StageThreads, *, cache_size: int = 4096
    ) -> None:
        self.moderator = moderator
        self.threads = threads
        self._batcher = MicroBatcher[str, float](moderator.scores, threads)
        self._scores: Recent[str, float] = Recent(cache_size)

    async def warm_up(self) -> None:
        await asyncio.to_thread(self.moderator.load)

    async def run(self, question: str, allowance: Allowance) -> Screened:
        return await self.screen_question(question, deadline=allowance.deadline)

    async def screen_question(self, question: str, *, deadline: float) -> Screened:
        score = self._scores.get(question)
        if score is None:
            batched = await self._batcher.submit(question, deadline=deadline)
            self._scores.put(question, batched.value)
            screened = Screened(batched.value, batched.batch_size, batched.wait_ms)
        else:
            screened = Screened(score, batch_size=0)
        if screened.score >= self.moderator.threshold:
            raise QuestionRejected(screened.score)
        return screened


@dataclass(frozen=True)
class Quarantined:
    """A passage kept out of the prompt, and the injection rules it tripped."""

    passage: Passage
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class ScreenedPassages(StageResult):
    """The passages that may go into the prompt (in rank order) and those quarantined."""

    passages: list[Passage]
    quarantined: list[Quarantined] = field(default_factory=list)
    elapsed_ms: float = 0.0

    def attributes(self) -> dict[str, float | int]:
        screened = len(self.passages) + len(self.quarantined)
        return {
            "ragtime.screen.passages": screened,
            "ragtime.screen.quarantined": len(self.quarantined),
            "ragtime.screen.ms_per_passage": round(self.elapsed_ms / max(screened, 1), 4),
        }

    def record(self, span: Span) -> None:
        """The attributes, and one ``passages_quarantined`` event naming what was kept out."""
        super().record(span)
        if self.quarantined and span.is_recording():
            span.add_event(
                "passages_quarantined",
                {
                    "ragtime.screen.quarantined": len(self.quarantined),
                    "ragtime.screen.passage_ids": [q.passage.id for q in self.quarantined],
                    "ragtime.screen.reasons": sorted(
                        {r for q in self.quarantined for r in q.reasons}
                    ),
                },
            )


class ScreenVerdicts:
    """Screen verdicts by passage text, the ``size`` most recently used kept: a chunk's text
    never changes, and the same chunks come back for many questions (the screen is regular
    expressions over the whole text, about 0.5 ms a passage of 1 KB)."""

    def __init__(self, size: int = 8192) -> None:
        self._kept: Recent[str, Verdict] = Recent(size)

    def get(self, text: str) -> Verdict | None:
        return self._kept.get(text)

    def screen(self, text: str) -> Verdict:
        """``text``'s verdict, kept or found now (and kept)."""
        verdict = self._kept.get(text)
        if verdict is None:
            verdict = screen(text)
            self._kept.put(text, verdict)
        return verdict


class ScreenPassages:
    """Quarantines the retrieved passages that carry instructions aimed at the model (prompt
    injection: ``app.safety.injection``'s rules), so that they never reach the prompt.

    Regular expressions only, about half a millisecond a passage, on the stage's thread; a
    passage screened before (its text kept in ``verdicts``) is not screened again, and when
    every passage of a request was, the verdicts are read on the event loop, with no thread.
    """

    name = StageName.MODERATE_PASSAGES
    component = "moderation"

    def __init__(self, threads: StageThreads, verdicts: ScreenVerdicts | None = None) -> None:
        self.threads = threads
        self.verdicts = verdicts or ScreenVerdicts()

    async def warm_up(self) -> None:
        """Nothing to load: the rules are compiled when ``app.safety.injection`` is imported."""

    async def run(self, passages: Sequence[Passage], allowance: Allowance) -> ScreenedPassages:
        return await self.screen_passages(passages, deadline=allowance.deadline)

    async def screen_passages(
        self, passages: Sequence[Passage], *, deadline: float
    ) -> ScreenedPassages:
        if not passages:
            return ScreenedPassages([])
        texts = [_screened_text(p) for p in passages]
        known = [self.verdicts.get(text) for text in texts]
        if all(verdict is not None for verdict in known):
            return _sorted(list(passages), [v for v in known if v is not None], 0.0)
        return await self.threads.call(self._screen, list(passages), texts, deadline=deadline)

    def _screen(self, passages: list[Passage], texts: list[str]) -> ScreenedPassages:
        started = time.perf_counter()
        verdicts = [self.verdicts.screen(text) for text in texts]
        return _sorted(passages, verdicts, (time.perf_counter() - started) * 1000.0)


def _screened_text(passage: Passage) -> str:
    return f"{passage.title}\n{passage.section}\n{passage.text}"


def _sorted(
    passages: list[Passage], verdicts: list[Verdict], elapsed_ms: float
) -> ScreenedPassages:
    kept: list[Passage] = []
    quarantined: list[Quarantined] = []
    for passage, verdict in zip(passages, verdicts, strict=True):
        if verdict.quarantine:
            quarantined.append(Quarantined(passage, verdict.reasons))
        else:
            kept.append(passage)
    return ScreenedPassages(kept, quarantined, elapsed_ms)


@dataclass(frozen=True)
class ModeratedTail(StageResult):
    """The end of a moderated answer: the text held back until now, and what was changed."""

    text: str
    redactions: dict[str, int] = field(default_factory=dict)
    inline_ms: float = 0.0
    """Time the filter spent on the streamed text, before this tail."""
    total_ms: float = 0.0
    """All the filter's time, this tail included."""

    @property
    def earlier_ms(self) -> float:
        """The filter's time while the answer streamed, charged to this stage too."""
        return self.inline_ms

    def attributes(self) -> dict[str, float | int]:
        attributes: dict[str, float | int] = {
            "ragtime.moderation.inline_ms": round(self.inline_ms, 3)
        }
        attributes.update(redaction_attributes(self.redactions, "ragtime.moderation"))
        return attributes


class ModerateAnswer:
    """Redacts personal data and masks profanity in the answer: ``open()`` a filter that the
    generated text streams through, then ``run()`` it to release what it still holds."""

    name = StageName.MODERATE_ANSWER
    component = "moderation"

    def __init__(self, moderator: Moderator) -> None:
        self.moderator = moderator

    async def warm_up(self) -> None:
        await asyncio.to_thread(self.moderator.load)

    def open(self) -> AnswerFilter:
        return self.moderator.answer_filter()

    async def run(self, answer_filter: AnswerFilter, allowance: Allowance) -> ModeratedTail:
        """What ``answer_filter`` still holds, released once the answer has ended."""
        return await self.moderate_tail(answer_filter)

    async def moderate_tail(self, answer_filter: AnswerFilter) -> ModeratedTail:
        inline_ms = answer_filter.elapsed_ms
        tail = answer_filter.flush()
        return ModeratedTail(
            tail, dict(answer_filter.redactions), inline_ms, answer_filter.elapsed_ms
        )
