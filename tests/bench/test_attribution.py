"""Citation attribution with the real question embedder (MiniLM): it picks the passage that
supports a sentence and leaves an unsupported one alone, and it holds its precision on the
labelled set that ``bench/suites/attribution/labelled.py`` builds (seed 1; the threshold was
chosen on seed 0), words first as the service attributes, and no lower than the embedder alone.
The set's own construction, and its scoring, are checked without a model."""

from __future__ import annotations

import time

import pytest

from app.stages import Attribute, StageThreads
from app.stages.citations import DEFAULT_THRESHOLD, sentences
from app.stages.lexical import Verdict
from bench.suites.attribution.labelled import (
    PASSAGES_PER_CASE,
    Decision,
    choose_threshold,
    decide,
    labelled_set,
    score,
)
from retrieval import Embedder
from tracing.budget import CostModel

#: The tests' set; the threshold was chosen on seed 0 (``ragtime bench attribution``).
TEST_SEED = 1


def test_the_labelled_set_pairs_sentences_with_their_passage_or_none() -> None:
    cases = labelled_set(TEST_SEED, cases=30)
    supported = [c for c in cases if c.supported_by is not None]
    assert len(supported) == 30 and len(cases) == 60
    assert {c.how for c in supported} == {"verbatim", "span", "reworded"}
    for case in cases:
        assert len(case.passages) == PASSAGES_PER_CASE
    for case in supported:
        source = case.passages[case.supported_by - 1]  # type: ignore[operator]
        if case.how == "verbatim":
            assert case.sentence in sentences(source)
        else:
            assert case.sentence not in sentences(source)
    # Unsupported sentences come from none of the passages they are given with.
    for case in cases:
        if case.supported_by is None:
            assert not any(case.sentence in sentences(p) for p in case.passages)
    assert labelled_set(TEST_SEED, cases=30) == cases  # a seed builds the same set


def test_the_threshold_is_the_lowest_that_reaches_the_precision() -> None:
    supported, unsupported = labelled_set(0, cases=1)
    decisions = [
        Decision(supported, supported.supported_by or 0, 0.8),
        Decision(supported, supported.supported_by or 0, 0.5),
        Decision(unsupported, 1, 0.55),
    ]
    assert score(decisions, 0.5).precision == pytest.approx(2 / 3)
    assert score(decisions, 0.6).precision == 1.0 and score(decisions, 0.6).recall == 0.5
    assert choose_threshold(decisions, 0.9) == 0.575  # the first grid step past 0.55


def test_words_first_take_their_verdict_over_the_similarity() -> None:
    supported, unsupported = labelled_set(0, cases=1)
    label = supported.supported_by or 0
    decisions = [
        Decision(supported, label, 0.5, Verdict(label, 1.0)),  # words found what cosine missed
        Decision(unsupported, 1, 0.9, Verdict(None, 0.0)),  # and kept a wrong one out
    ]
    alone, first = score(decisions, 0.725), score(decisions, 0.725, words=True)
    assert (alone.precision, alone.recall, alone.false_on_unsupported) == (0.0, 0.0, 1)
    assert (first.precision, first.recall, first.false_on_unsupported) == (1.0, 1.0, 0)
    left_open = Decision(supported, label, 0.8)  # words left it to the embedder
    assert left_open.attributed_to(0.725) == label and left_open.attributed_to(0.85) is None


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    embedder = Embedder(backend="torch")
    embedder.load()
    return embedder


DEFAULTS = (
    "The default values are evaluated at the point of function definition in the defining "
    "scope. The default value is evaluated only once. This makes a difference when the default "
    "is a mutable object such as a list, dictionary, or instances of most classes."
)
VENV = (
    "The module used to create and manage virtual environments is called venv. To create a "
    "virtual environment, decide upon a directory where you want to place it, and run the venv "
    "module as a script with the directory path."
)
FLOATS = (
    "Floating-point numbers are represented in computer hardware as base 2 (binary) fractions. "
    "Most decimal fractions cannot be represented exactly as binary fractions."
)


@pytest.mark.slow
async def test_minilm_attributes_the_supporting_passage_and_leaves_the_rest(
    minilm: Embedder,
) -> None:
    """Needs the real MiniLM: whether a paraphrase is near its source is the model's to say."""
    stage = Attribute(
        minilm, StageThreads("attribute", 1, costs=CostModel()), threshold=DEFAULT_THRESHOLD
    )
    answer = (
        "A default value is evaluated just once, when the function is defined. "
        "You make a virtual environment by running the venv module with a directory. "
        "The Eiffel Tower was finished in 1889 for the World's Fair in Paris."
    )
    attributed = await stage.attribute_answer(
        answer, {1: FLOATS, 2: DEFAULTS, 3: VENV}, deadline=time.perf_counter() + 60
    )
    assert attributed.method == "attributed"
    assert sorted(attributed.cited) == [2, 3]
    assert attributed.sentences == 3 and attributed.unsupported == 1
    nothing = await stage.attribute_answer(
        "The Eiffel Tower was finished in 1889 for the World's Fair in Paris.",
        {1: FLOATS, 2: DEFAULTS, 3: VENV},
        deadline=time.perf_counter() + 60,
    )
    assert nothing.method == "unattributed" and not nothing.cited


@pytest.mark.slow
def test_precision_on_the_labelled_set_holds_its_floor(minilm: Embedder) -> None:
    """Needs the real MiniLM. The threshold (0.725) was chosen on seed 0 as the lowest with
    precision >= 0.9; this seed's set was not looked at to choose it. Measured here when it was
    chosen: precision 0.938 (75 of 80 attributions right), recall 0.938; on 2026-12-07 0.936 and
    0.912, and words first 0.940 and 0.988. The floor is the target the threshold was chosen
    for, 0.9: three more wrong attributions out of 80 would break it, so a change to the
    sentence splitting, the embedder, the threshold or the rules words decide by that costs
    precision shows here. Recall's floor, 0.85, is a margin under the embedder alone's figure;
    words first must lose neither against the embedder alone."""
    decisions = decide(labelled_set(TEST_SEED), minilm.embed)
    alone = score(decisions, DEFAULT_THRESHOLD)
    first = score(decisions, DEFAULT_THRESHOLD, words=True)
    assert first.precision >= 0.9, first
    assert first.recall >= 0.85, first
    assert first.precision >= alone.precision and first.recall >= alone.recall, (alone, first)
    verbatim = [d for d in decisions if d.case.how == "verbatim"]
    assert score(verbatim, DEFAULT_THRESHOLD, words=True).recall >= 0.95
