"""``grounded`` (app/stages/grounding.py) is judged on what the answer adds to its question: an
echo is not grounded, a short answer a passage states is, a refusal and another question's
answer are not; on the tests' half of the labelled answers built from demo/answers, its precision
is at least 0.9 (issue 43 §3)."""

from __future__ import annotations

import pytest

from app.stages.grounding import GROUNDED_SHARE, judge, terms
from bench.suites.attribution.grounding import labelled_answers, scores

PASSAGE = (
    "The building was finished in 1889. It is 812 feet tall, and its lift opens at 10:30. "
    "Default values are evaluated once, when the function is defined."
)


@pytest.mark.parametrize(
    ("question", "answer", "grounded"),
    [
        ("How tall is the building?", "812.", True),
        ("When does the lift open?", "10:30 [1].", True),
        ("How tall is the building?", "The building is tall.", False),  # an echo
        ("How tall is the building?", "How tall is the building? [1]", False),
        ("How tall is the building?", "It is 950 feet, made of granite.", False),
        ("How tall is the building?", "I don't know.", False),
        ("How tall is the building?", "The passages do not say; it might be 812.", False),
        ("When are default values evaluated?", "Once, when the function is defined.", True),
        ("How tall is the building?", "", False),
    ],
)
def test_grounded_is_what_the_answer_adds_that_a_passage_holds(
    question: str, answer: str, grounded: bool
) -> None:
    assert judge(question, answer, [PASSAGE]).grounded is grounded


def test_labels_and_stop_words_are_not_content_and_plurals_match() -> None:
    assert terms("The lists [1] are mutable; use lists.") == {"list", "mutable"}
    assert judge("q?", "[1] [2]", [PASSAGE]).new_terms == 0


def test_on_the_tests_half_of_the_labelled_answers_precision_is_at_least_0_9() -> None:
    answers = labelled_answers(1)
    assert {a.kind for a in answers} == {"correct", "short", "wrong", "echo", "refusal"}
    precision, recall = scores(answers, GROUNDED_SHARE)
    assert precision >= 0.9
    assert recall >= 0.8  # reported in BENCHMARKS.md; a floor, so a change that loses it shows
