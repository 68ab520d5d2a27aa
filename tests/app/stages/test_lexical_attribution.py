"""``app.stages.lexical``: which answer sentences words decide, and how; the others are left to
the embedder (None)."""

from __future__ import annotations

import pytest

from app.stages.lexical import Verdict, decide, passage_words

DEFAULTS = (
    "The default value is evaluated only once. This makes a difference when the default is a "
    "mutable object such as a list, dictionary, or instances of most classes."
)
VENV = (
    "The module used to create and manage virtual environments is called venv. Run the venv "
    "module as a script with the directory path."
)
FAQ_DEFAULTS = "The default value is evaluated once, when the function is defined."
PASSAGES = {1: passage_words(DEFAULTS), 2: passage_words(VENV)}


def test_a_sentence_of_one_passage_words_is_given_to_it() -> None:
    verdict = decide("The venv module creates and manages virtual environments.", PASSAGES)
    assert verdict == Verdict(2, 1.0)
    # Four terms of five are enough (a span of the sentence, or a word changed).
    verdict = decide("The venv module creates virtual copies.", PASSAGES)
    assert verdict is not None and verdict.label == 2 and verdict.share == pytest.approx(0.8)


def test_words_leave_it_open_when_another_passage_holds_nearly_as_many() -> None:
    both = {1: passage_words(DEFAULTS), 2: passage_words(FAQ_DEFAULTS)}
    assert decide("The default value is evaluated only once.", both) is None  # 1.0 and 1.0
    # The same sentence among passages that do not repeat it: words decide.
    assert decide("The default value is evaluated only once.", PASSAGES) == Verdict(1, 1.0)


def test_a_sentence_sharing_too_few_words_is_left_to_the_embedder() -> None:
    assert decide("A default value makes the function slower.", PASSAGES) is None  # 2 of 4
    assert decide("Defaults are evaluated once.", PASSAGES) is None  # 3 terms: too few to give


def test_a_sentence_no_passage_holds_words_of_is_supported_by_none() -> None:
    assert decide("The Eiffel Tower was finished in 1889.", PASSAGES) == Verdict(None, 0.0)
    assert decide("ok ok ok ok", PASSAGES) == Verdict(None, 0.0)  # no content word at all
    # Three terms or more, and no passage holds more than one of them.
    verdict = decide("The Eiffel Tower holds a list of tourists.", PASSAGES)
    assert verdict is not None and verdict.label is None
    # Two terms, one held: too little to say either way.
    assert decide("Tourists like a list.", PASSAGES) is None


def test_with_no_passage_nothing_supports_it() -> None:
    assert decide("The default value is evaluated only once.", {}) == Verdict(None, 0.0)
