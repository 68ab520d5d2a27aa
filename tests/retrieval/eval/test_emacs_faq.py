"""Building the emacs-faq set from a hand-made FAQ in the Info format emacs-common ships (not
the .deb): its questions, answers without their titles, relevance labels, the top and chapter
pages, and the error when the data is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.eval import EvalDataMissing
from retrieval.eval.emacs_faq import build_dataset, nodes, plain_question, require_info
from retrieval.formats import parse_file
from tests.helpers.emacs_faq_tree import EFAQ, write_info
from tests.helpers.eval_corpus import corpus_files


@pytest.fixture
def info(tmp_path: Path) -> Path:
    return require_info(write_info(tmp_path / "eval").parent.parent)


def test_questions_are_the_entries_titles(info: Path, tmp_path: Path) -> None:
    dataset = build_dataset(info, tmp_path / "corpus")
    assert [(q.id, q.text) for q in dataset.questions] == [
        ("common-requests-001", "How do I make Emacs show the line number of each line?"),
        ("common-requests-002", "Spell-checkers"),  # an entry, though not a question
        # 1.3's empty answer left out
        ("key-bindings-001", "How do I swap two keys that I don't like?"),
    ]
    assert dataset.name == "emacs-faq" and len(dataset.fingerprint) == 16


def test_answers_are_the_nodes_text_without_header_or_title(info: Path, tmp_path: Path) -> None:
    dataset = build_dataset(info, tmp_path / "corpus")
    first = (dataset.corpus_dir / dataset.questions[0].answer_source).read_text()
    assert first.startswith("Turn on ‘display-line-numbers-mode’ in the buffer")
    assert "File: efaq.info" not in first and "1.1" not in first and "===" not in first
    assert "*note Key bindings::" in first  # the text as Info shows it
    for question in dataset.questions:
        document = parse_file(dataset.corpus_dir / question.answer_source)  # ingest reads it
        text = " ".join(block.text for block in document.blocks)
        assert question.text not in text and "line number of each" not in text
    swap = (dataset.corpus_dir / dataset.questions[2].answer_source).read_text()
    assert "(keyboard-translate ?\\C-t ?\\C-x)" in swap and "Concept" not in swap


def test_each_question_is_labelled_with_its_own_answer_file(info: Path, tmp_path: Path) -> None:
    dataset = build_dataset(info, tmp_path / "corpus")
    sources = [q.answer_source for q in dataset.questions]
    assert sources == [f"faq-answers/answer-{n:03d}.txt" for n in range(1, 4)]
    assert all(not q.relevant for q in dataset.questions)
    files = corpus_files(dataset)
    assert files == [
        *sources,
        "faq-pages/common-requests.txt",
        "faq-pages/key-bindings.txt",
        "faq-pages/top.txt",
    ]  # the concept index left out
    assert dataset.documents == 6
    chapter = (dataset.corpus_dir / "faq-pages" / "key-bindings.txt").read_text()
    assert chapter.startswith("2 Key bindings\n**************\n\nKeys are bound")
    assert "* Swapping keys::" in chapter


def test_nodes_skip_the_preamble_and_trailers() -> None:
    names = [node.name for node in nodes(EFAQ)]
    assert names[0] == "Top" and names[-1] == "Concept index" and len(names) == 8
    assert nodes(EFAQ)[2].underline == "=" and nodes(EFAQ)[1].underline == "*"


def test_plain_question_drops_numbers_and_code_quotes() -> None:
    assert plain_question("5.43 How do I turn on ‘font-lock-mode’?") == (
        "How do I turn on font-lock-mode?"
    )
    assert plain_question("6.5 Why does Emacs say ‘Error in init file’?") == (
        "Why does Emacs say Error in init file?"
    )
    assert plain_question("3.1 I’m just\n starting Emacs") == "I'm just starting Emacs"


def test_the_fingerprint_follows_the_content(info: Path, tmp_path: Path) -> None:
    first = build_dataset(info, tmp_path / "a").fingerprint
    assert build_dataset(info, tmp_path / "b").fingerprint == first
    info.write_text(EFAQ.replace("Aspell or Hunspell", "Hunspell"))
    assert build_dataset(info, tmp_path / "c").fingerprint != first


def test_missing_data_names_the_make_target(tmp_path: Path) -> None:
    with pytest.raises(EvalDataMissing, match="make eval-data") as caught:
        require_info(tmp_path / "nothing-here")
    assert "apt-get download emacs-common" in str(caught.value)
    empty = tmp_path / "empty.info"
    empty.write_text("This is efaq.info, with no node.\n")
    with pytest.raises(EvalDataMissing, match="no questions"):
        build_dataset(empty, tmp_path / "corpus")
