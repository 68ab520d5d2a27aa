"""The extract stage (``app/stages/extraction.py``): the passages' own answer in their words with
their labels, the abstention below the threshold, and ``auto``'s fallback said as a degradation.
The sentence vectors are made by hand, so which sentence is closest is known."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from app.stages.extraction import (
    ABSTENTION,
    MAX_PIECES,
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


def prompt_passage(label: int, text: str) -> PromptPassage:
    passage = Passage(label, "demo", f"doc{label}.md", "", "", text, 0.5)
    return PromptPassage(label, passage, text, 10, False)


def weigh(vector: np.ndarray | None, *, least: float = 0.3, **rows: np.ndarray) -> Extracted:
    stage = ExtractAnswer(
        min_similarity=least,
        stored_rows=lambda collection, chunk_id: ROWS.get(chunk_id),
    )
    passages = [prompt_passage(1, FIRST), prompt_passage(2, SECOND)]
    return stage.extract(Evidence(QUESTION, vector, passages))


def test_the_closest_sentence_answers_in_its_passages_words_with_its_label() -> None:
    found = weigh(unit(0.1, 1, 0))
    assert found.answerable and found.similarity == pytest.approx(0.995, abs=0.01)
    assert found.text.startswith("Tuples cannot be changed once made.")
    assert found.text.endswith("[1]") and found.cited == (1,)
    assert "Lists are" not in found.text, "a sentence far from the best is left out"


def test_sentences_near_the_best_join_it_in_their_passages_order_each_labelled() -> None:
    found = weigh(unit(0, 0.6, 0, 0.8))
    assert found.cited == (1, 2)
    assert found.text.index("Tuples cannot") < found.text.index("Dictionaries map")
    assert "made. [1]" in found.text and found.text.count("[2]") == 1


def test_a_sentence_ending_in_a_colon_brings_the_example_it_introduces() -> None:
    found = weigh(unit(0, 0, 0, 0, 1))
    assert "A key must be hashable: here is how:\n" in found.text
    assert "d = {}" in found.text and found.text.endswith("[2]")


def test_no_sentence_close_enough_abstains() -> None:
    found = weigh(unit(0, 0, 0, 0, 0, 0, 1), least=0.3)
    assert not found.answerable and found.text == ABSTENTION and found.cited == ()
    assert found.similarity == pytest.approx(0.0, abs=1e-6)


def test_a_threshold_of_minus_one_never_abstains() -> None:
    found = weigh(unit(0, 0, 0, 0, 0, 0, 1), least=-1.0)
    assert found.answerable and found.cited


def test_passages_that_cannot_be_weighed_answer_with_their_openings() -> None:
    found = weigh(None)
    assert found.answerable and found.similarity is None
    assert found.text.startswith("Lists are sequences of items. [1]")
    assert found.cited == (1, 2) and len(found.cited) <= MAX_PIECES


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
