"""The question screen and the answer filter's last step, called directly."""

from __future__ import annotations

import time

import pytest

from app.moderation import Moderator, QuestionRejected
from app.stages import ModerateAnswer, ScreenQuestion, StageThreads


@pytest.fixture(scope="module")
def moderator() -> Moderator:
    moderator = Moderator(0.9)
    moderator.load()
    return moderator


async def test_a_clean_question_passes_with_its_score(moderator: Moderator) -> None:
    stage = ScreenQuestion(moderator, StageThreads("moderate.question", 1))
    screened = await stage.run("How do I sort a list?", deadline=time.perf_counter() + 5)
    assert 0.0 <= screened.score < 0.9
    assert screened.attributes() == {"ragtime.moderation.score": round(screened.score, 4)}


async def test_an_abusive_question_is_rejected(moderator: Moderator) -> None:
    stage = ScreenQuestion(moderator, StageThreads("moderate.question", 1))
    with pytest.raises(QuestionRejected):
        await stage.run("fuck you, you shit", deadline=time.perf_counter() + 5)


async def test_the_tail_is_released_redacted_with_the_counts(moderator: Moderator) -> None:
    stage = ModerateAnswer(moderator)
    answer_filter = stage.open()
    sent = answer_filter.feed("Write to me at jane.doe@example.com")
    tail = await stage.run(answer_filter)
    whole = sent + tail.text
    assert "jane.doe@example.com" not in whole
    assert tail.redactions == {"email": 1}
    assert tail.attributes()["ragtime.moderation.redacted.email"] == 1
    assert tail.total_ms >= tail.inline_ms >= 0.0
