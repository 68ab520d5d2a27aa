"""The compiled profanity scorer: the library's scores, faster, and the library's when unsure."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
from profanity_check import predict_prob
from profanity_check.profanity_check import model, vectorizer

from app.safety.moderation import Moderator
from app.safety.profanity_scorer import LinearCalibratedScorer, compile_scorer

DEMO_QUESTIONS = Path(__file__).resolve().parents[3] / "demo" / "questions.txt"


def texts() -> list[str]:
    questions = [
        line for line in DEMO_QUESTIONS.read_text().splitlines() if line and line[0] != "#"
    ]
    abusive = ["you dumb bitch", "go to hell you bastard", "what the fuck is a tuple", "idiot"]
    words = ["the", "a", "list", "damn", "crap", "hello", "python", "piss", "off"]
    return questions + abusive + words


def test_the_compiled_scorer_gives_the_library_scores() -> None:
    sample = texts()
    compiled = LinearCalibratedScorer(vectorizer, model)(sample)
    library = predict_prob(sample)
    assert np.allclose(compiled, library, rtol=0.0, atol=1e-9)
    assert (library >= 0.9).any() and (library < 0.1).any()  # both kinds are in the sample


def test_the_moderator_uses_it() -> None:
    moderator = Moderator()
    moderator.load()
    assert isinstance(moderator._predict, LinearCalibratedScorer)
    assert moderator.scores(["you dumb bitch"])[0] >= 0.9


def test_a_model_of_another_shape_keeps_the_library_function() -> None:
    other = copy.deepcopy(model)
    other.calibrated_classifiers_[0].method = "isotonic"
    assert compile_scorer(vectorizer, other, predict_prob) is predict_prob


def test_a_scorer_that_disagrees_keeps_the_library_function() -> None:
    drifted = copy.deepcopy(model)
    drifted.calibrated_classifiers_[0].calibrators[0].a_ *= 1.01
    # The reference is the untouched library: the copy's compiled scores differ from it.
    assert compile_scorer(vectorizer, drifted, predict_prob) is predict_prob
