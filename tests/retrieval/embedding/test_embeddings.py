"""Embedder with the real shipped MiniLM (loaded once per session)."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval import Embedder, RetrievalError, default_embedding_model_path

pytestmark = pytest.mark.slow


def test_default_model_is_the_shipped_minilm() -> None:
    path = default_embedding_model_path()
    assert path.is_dir() and any(path.iterdir())
    embedder = Embedder()
    assert embedder.model_name == str(path)
    assert not embedder.loaded  # construction is cheap: nothing loaded yet
    with pytest.raises(RetrievalError, match="not loaded"):
        embedder.embed(["x"])


def test_vectors_are_normalised_float32_rows(embedder: Embedder) -> None:
    embedder.load()  # idempotent
    assert embedder.loaded and embedder.dim == 384
    vectors = embedder.embed(["first text", "second text", "a third, longer piece of text"])
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_no_texts_give_an_empty_matrix(embedder: Embedder) -> None:
    vectors = embedder.embed([])
    assert vectors.shape == (0, 384) and vectors.dtype == np.float32


def test_a_single_string_is_refused(embedder: Embedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed("one string")  # a str is a Sequence[str]: only run time can refuse it


def test_a_question_is_closest_to_the_passage_that_answers_it(embedder: Embedder) -> None:
    question, relevant, unrelated = embedder.embed(
        [
            "How do I give a function parameter a default value?",
            "Default argument values: def ask_ok(prompt, retries=4) lets a function be called "
            "with fewer arguments than it is defined to allow.",
            "Floating point numbers are represented in computer hardware as base 2 fractions.",
        ]
    )
    assert float(question @ relevant) > float(question @ unrelated) + 0.2
