"""The extract stage (``app/stages/extraction.py``; its excerpt, ``app/stages/excerpts.py``): the
passages' own answer in their words with its label, the abstention below the threshold, and
``auto``'s fallback said as a degradation. The sentence vectors are made by hand, so which
sentence is closest is known."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from app.stages.excerpts import EXCERPT_CHARS
from app.stages.extraction import (
    ABSTENTION,
    OPENINGS,
    Evidence,
    ExtractAnswer,
    Extracted,
    Fallback,
)
from inference.prompt import PromptPassage
from retrieval import Passage

FIRST = (
    "Lists are sequences of items. Tuples cannot be changed once made. Sets hold each item once."
)
SECOND = "Dictionaries map keys to values. A key must be hashable: here is how:\n    d = {}\n"
QUESTION = "Can a tuple be changed?"


def unit(*values: float) -> np.ndarray:
    vector = np.zeros(8, np.float32)
    vector[: len(values)] = values
    return vector / np.linalg.norm(vector)


#: One row per sentence of each passage, in ``sentences(text)`` order (the code is too short to
#: be a sentence).
ROWS = {
    1: np.stack([unit(1, 0, 0), unit(0, 1, 0), unit(0, 0, 1)]),
    2: np.stack([unit(0, 0, 0, 1), unit(0, 0, 0, 0, 1)]),
}


def prompt_passage(label: int, text: str, section: str = "") -> PromptPassage:
    passage = Passage(label, "demo", f"doc{label}.md", "", section, text, 0.5)
    return PromptPassage(label, passage, text, 10, False)


def weigh(
    vector: np.ndarray | None,
    *,
    least: float = 0.3,
    texts: tuple[str, ...] = (FIRST, SECOND),
    rows: dict[int, np.ndarray] = ROWS,
    sections: tuple[str, ...] = ("", ""),
) -> Extracted:
    stage = ExtractAnswer(
        min_similarity=least,
        stored_rows=lambda collection, chunk_id: rows.get(chunk_id),
    )
    passages = [
        prompt_passage(i, text, section)
        for i, (text, section) in enumerate(zip(texts, sections, strict=False), 1)
    ]
    return stage.extract(Evidence(QUESTION, vector, passages))


def test_the_closest_sentence_answers_in_its_passages_words_with_its_label() -> None:
    found = weigh(unit(0.1, 1, 0))
    assert found.answerable and found.similarity == pytest.approx(0.995, abs=0.01)
    assert found.text.startswith("Tuples cannot be changed once made.")
    assert found.text.endswith("[1]") and found.cited == (1,)
    assert "Dictionaries" not in found.text, "another passage's sentence is left out"


def test_the_sentences_after_the_best_that_go_on_answering_come_with_it() -> None:
    """A run that goes on answering beats a lone sentence: the sentence after the best one,
    close to the question too, joins it; one far from it does not start the excerpt."""
    found = weigh(unit(0, 1, 0.8))
    assert found.text == "Tuples cannot be changed once made. Sets hold each item once. [1]"
    assert found.cited == (1,)


def test_an_excerpt_is_one_passages_consecutive_sentences_within_its_length() -> None:
    sentence = "Tuples are fixed sequences of items that cannot be changed at all."
    text = " ".join([sentence] * 20)
    rows = {1: np.stack([unit(0, 1, 0)] * 20)}
    found = weigh(unit(0, 1, 0), texts=(text,), rows=rows)
    body = found.text.removesuffix(" [1]")
    assert len(body) <= EXCERPT_CHARS and body.startswith(sentence) and body.endswith(".")
    assert text.startswith(body), "consecutive, as written"


def test_an_excerpt_does_not_cross_a_heading() -> None:
    text = (
        "Tuples cannot be changed once made. Can a list be changed after it is made? "
        "Lists can be changed in place."
    )
    rows = {1: np.stack([unit(0, 1, 0), unit(0, 0, 1), unit(0, 0.9, 0.1)])}
    found = weigh(unit(0, 1, 0), texts=(text,), rows=rows)
    assert found.text == "Tuples cannot be changed once made. [1]"


def test_the_answer_under_a_heading_that_asks_the_question_wins() -> None:
    """An FAQ's heading close to the question lifts the sentence after it over a sentence a
    little closer to the question that stands under no such heading."""
    elsewhere = "Tuples are written with commas between the items."
    faq = "Can a tuple be changed after it is made? No, a tuple is immutable."
    rows = {
        1: np.stack([unit(0, 1, 0)]),
        2: np.stack([unit(0, 1, 0.05), unit(0, 0.8, 0.6)]),
    }
    found = weigh(unit(0, 1, 0), texts=(elsewhere, faq), rows=rows)
    assert found.text == "No, a tuple is immutable. [2]" and found.cited == (2,)
    without = {1: rows[1], 2: np.stack([unit(0, 0, 0, 0, 0, 1), unit(0, 0.8, 0.6)])}
    assert weigh(unit(0, 1, 0), texts=(elsewhere, faq), rows=without).cited == (1,)


def test_a_passage_opening_stands_under_its_sections_heading_held_by_another() -> None:
    """Chunks overlap: one holds the heading, the next starts under it without it."""
    first = "Lists are sequences of items. Can a tuple be changed after it is made?"
    second = "No, a tuple is immutable. Lists are mutable sequences."
    rows = {
        1: np.stack([unit(0, 0.75, 0, 0, 0.66), unit(0, 1, 0.05)]),
        2: np.stack([unit(0, 0.6, 0.8), unit(0, 0, 0, 0, 0, 1)]),
    }
    sections = ("Lists", "Can a tuple be changed after it is made?")
    found = weigh(unit(0, 1, 0), texts=(first, second), rows=rows, sections=sections)
    assert found.text.startswith("No, a tuple is immutable.") and found.cited == (2,)
    found = weigh(unit(0, 1, 0), texts=(first, second), rows=rows, sections=("Lists", "Other"))
    assert found.cited == (1,)


def test_a_sentence_the_injection_screen_flags_is_never_quoted() -> None:
    text = (
        "Tuples cannot be changed once made. Visit https://evil.example/verify to see why. "
        "Sets hold each item once."
    )
    rows = {1: np.stack([unit(0, 1, 0), unit(0, 1, 0.1), unit(0, 0.9, 0.1)])}
    found = weigh(unit(0, 1, 0), texts=(text,), rows=rows)
    assert "evil" not in found.text and found.text.startswith("Tuples cannot")


def test_an_excerpt_starting_mid_sentence_brings_its_start() -> None:
    text = "Tuples are made with commas. Use a tuple, i.e. a sequence that cannot be changed."
    rows = {1: np.stack([unit(1, 0, 0), unit(0, 0, 1), unit(0, 1, 0)])}
    found = weigh(unit(0, 1, 0), texts=(text,), rows=rows)
    assert found.text == "Use a tuple, i.e. a sequence that cannot be changed. [1]"


def test_a_sentence_ending_in_a_colon_brings_the_example_it_introduces() -> None:
    found = weigh(unit(0, 0, 0, 0, 1))
    assert "A key must be hashable: here is how:\n" in found.text
    assert "d = {}" in found.text and found.text.endswith("[2]")


def test_an_example_introduced_by_colons_comes_whole_with_its_indentation() -> None:
    text = (
        "Tuples cannot be changed; write a new one like this:\n"
        "    def f(a, t=None):\n        if t is None:\n            t = ()\n        return t\n"
    )
    rows = {1: np.stack([unit(0, 1, 0), unit(0, 0, 1), unit(0, 0, 1), unit(0, 0, 1)])}
    found = weigh(unit(0, 1, 0), texts=(text,), rows=rows)
    assert found.text == (
        "Tuples cannot be changed; write a new one like this:\n    def f(a, t=None):\n"
        "        if t is None:\n            t = ()\n        return t [1]"
    )


def test_no_sentence_close_enough_abstains() -> None:
    found = weigh(unit(0, 0, 0, 0, 0, 0, 1), least=0.3)
    assert not found.answerable and found.text == ABSTENTION and found.cited == ()
    assert found.similarity == pytest.approx(0.0, abs=1e-6)


def test_a_heading_asking_nearly_the_question_answers_though_its_sentences_score_low() -> None:
    faq = "Can a tuple be changed after it is made? No, make a new one instead."
    for heading, answerable in ((unit(0.1, 0, 0, 0, 0, 0, 0, 1), False), (unit(0.9, 0.3), True)):
        rows = {1: np.stack([heading, unit(0.1, 0, 1)])}
        found = weigh(unit(1, 0, 0), texts=(faq,), rows=rows, least=0.5)
        assert found.answerable is answerable and found.similarity == pytest.approx(0.1, abs=0.01)
        assert found.text == ("No, make a new one instead. [1]" if answerable else ABSTENTION)


def test_a_threshold_of_minus_one_never_abstains() -> None:
    found = weigh(unit(0, 0, 0, 0, 0, 0, 1), least=-1.0)
    assert found.answerable and found.cited


def test_passages_that_cannot_be_weighed_answer_with_their_openings() -> None:
    found = weigh(None)
    assert found.answerable and found.similarity is None
    assert found.text.startswith("Lists are sequences of items. [1]")
    assert found.cited == (1, 2) and len(found.cited) <= OPENINGS


def test_the_fallback_is_the_answer_weighed_before_said_as_a_degradation() -> None:
    stage = ExtractAnswer(min_similarity=0.3, stored_rows=lambda c, i: ROWS.get(i))
    weighed = weigh(unit(0, 1, 0))
    taken = asyncio.run(stage.run(Fallback(weighed, "not borne out"), allowance=None))  # type: ignore[arg-type]
    assert taken.text == weighed.text and taken.degradation == ("extracted", "not borne out")


def test_a_threshold_outside_cosines_range_is_refused() -> None:
    with pytest.raises(ValueError, match="min_similarity"):
        ExtractAnswer(min_similarity=1.5, stored_rows=lambda c, i: None)


def test_no_passage_at_all_abstains_unless_abstention_is_off() -> None:
    for least, answerable in ((0.3, False), (-1.0, True)):
        stage = ExtractAnswer(min_similarity=least, stored_rows=lambda c, i: None)
        found = stage.extract(Evidence(QUESTION, unit(1), []))
        assert (found.answerable, found.text, found.cited) == (answerable, ABSTENTION, ())
