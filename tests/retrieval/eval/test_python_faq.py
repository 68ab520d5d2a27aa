"""Building the python-faq dataset from a hand-made doc tree (not the .deb)."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.eval import EvalDataMissing, build_dataset, require_sources
from retrieval.eval.python_faq import faq_questions, plain
from tests.helpers.eval_corpus import corpus_files
from tests.helpers.python_doc_tree import PROGRAMMING_FAQ


def test_questions_are_the_faq_headings_and_answers_drop_them(
    eval_data: Path, tmp_path: Path
) -> None:
    dataset = build_dataset(require_sources(eval_data), tmp_path / "corpus")
    texts = [q.text for q in dataset.questions]
    # general.rst.txt sorts first; the empty answer is left out; the :term: role made plain.
    assert texts == [
        "Why is it called Python?",
        "How do I sort a list in place?",
        "What is a lambda expression?",
        "How can I copy an object?",
    ]
    sort_answer = (dataset.corpus_dir / dataset.questions[1].answer_source).read_text()
    assert "Call the ``sort`` method" in sort_answer
    assert "How do I sort" not in sort_answer  # the heading is not indexed
    assert "lambda expression" not in sort_answer  # nor the next question
    copy_answer = (dataset.corpus_dir / dataset.questions[3].answer_source).read_text()
    assert "copy.deepcopy" in copy_answer and "Objects" not in copy_answer


def test_the_corpus_is_the_other_docs_plus_one_file_per_answer(
    eval_data: Path, tmp_path: Path
) -> None:
    dataset = build_dataset(require_sources(eval_data), tmp_path / "corpus")
    files = corpus_files(dataset)
    assert files == [
        "docs/library/pickle.rst.txt",
        "docs/library/turtle.rst.txt",
        "docs/tutorial/floats.rst.txt",
        "faq-answers/answer-001.rst.txt",
        "faq-answers/answer-002.rst.txt",
        "faq-answers/answer-003.rst.txt",
        "faq-answers/answer-004.rst.txt",
    ]
    assert dataset.documents == 7
    assert {q.answer_source for q in dataset.questions} == {f for f in files if "answer" in f}


def test_the_fingerprint_follows_the_content(eval_data: Path, tmp_path: Path) -> None:
    sources = require_sources(eval_data)
    first = build_dataset(sources, tmp_path / "a").fingerprint
    assert build_dataset(sources, tmp_path / "b").fingerprint == first
    (sources / "library" / "pickle.rst.txt").write_text("changed\n")
    assert build_dataset(sources, tmp_path / "c").fingerprint != first


def test_missing_data_names_the_make_target(tmp_path: Path) -> None:
    with pytest.raises(EvalDataMissing, match="make eval-data"):
        require_sources(tmp_path / "nothing-here")


def test_a_tree_without_questions_is_refused(tmp_path: Path) -> None:
    sources = tmp_path / "_sources"
    (sources / "faq").mkdir(parents=True)
    (sources / "faq" / "index.rst.txt").write_text("FAQ\n===\n\nNothing here.\n")
    with pytest.raises(EvalDataMissing, match="no questions"):
        build_dataset(sources, tmp_path / "corpus")


def test_plain_removes_markup() -> None:
    assert plain("How do I use :func:`sorted` with ``key``?") == "How do I use sorted with key?"
    assert plain("Is `Tkinter <https://x>`_ slow?") == "Is Tkinter slow?"
    assert (
        plain(":meth:`~object.__del__` and :ref:`the tutorial <tut>`") == "__del__ and the tutorial"
    )


def test_an_overlined_title_is_not_a_question() -> None:
    pairs = faq_questions(PROGRAMMING_FAQ)
    assert "Programming FAQ" not in [q for q, _ in pairs]
    assert "General Questions" not in [q for q, _ in pairs]
