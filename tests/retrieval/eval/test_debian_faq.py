"""Building the debian-faq set from a hand-made FAQ in the package's DocBook HTML (not the .deb):
its questions, answers without their headings, relevance labels, the rest of each chapter,
and the error when the data is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.eval import EvalDataMissing
from retrieval.eval.debian_faq import build_dataset, chapter_questions, require_faq
from retrieval.formats import parse_file
from tests.helpers.debian_faq_tree import CHOOSING, write_faq
from tests.helpers.eval_corpus import corpus_files


@pytest.fixture
def faq(tmp_path: Path) -> Path:
    return require_faq(write_faq(tmp_path / "eval").parent.parent)


def _text(path: Path) -> str:
    """A corpus file as ragtime's ingest reads it: its blocks' text and headings."""
    document = parse_file(path)
    return "\n".join(" ".join([*block.path, block.text]) for block in document.blocks)


def test_questions_are_the_headings_with_a_question_mark(faq: Path, tmp_path: Path) -> None:
    dataset = build_dataset(faq, tmp_path / "corpus")
    assert [(q.id, q.text) for q in dataset.questions] == [
        ("choosing-001", "Which Debian distribution should I run?"),
        ("choosing-002", "Can I move from stable to testing later?"),
        ("choosing-003", "Does unstable ever get frozen?"),  # 3.1.2's empty answer left out
        ("pkgtools-001", "What programs does Debian provide for managing its packages?"),
        ("pkgtools-002", "How can I tell which package owns a file?"),
    ]
    assert dataset.name == "debian-faq" and len(dataset.fingerprint) == 16


def test_answers_drop_their_heading_and_stop_at_the_next_question(
    faq: Path, tmp_path: Path
) -> None:
    dataset = build_dataset(faq, tmp_path / "corpus")
    answers = {q.text: _text(dataset.corpus_dir / q.answer_source) for q in dataset.questions}
    for question, answer in answers.items():
        assert question not in answer  # the heading is not indexed
    run = answers["Which Debian distribution should I run?"]
    assert "security fixes" in run and "full upgrade" not in run  # 3.1.1 is its own answer
    tools = answers["What programs does Debian provide for managing its packages?"]
    # sub-sections that are not questions stay in the answer, headings and all
    assert "dpkg" in tools and "Resolves dependencies" in tools and "APT" in tools
    assert "graphical" not in tools  # the chapter's footnotes are not the last answer's
    owns = answers["How can I tell which package owns a file?"]
    assert "dpkg --search /usr/bin/less" in owns


def test_each_question_is_labelled_with_its_own_answer_file(faq: Path, tmp_path: Path) -> None:
    dataset = build_dataset(faq, tmp_path / "corpus")
    sources = [q.answer_source for q in dataset.questions]
    assert sources == [f"faq-answers/answer-{n:03d}.html" for n in range(1, 6)]
    assert all(not q.relevant for q in dataset.questions)  # the one answer, nothing else
    files = corpus_files(dataset)
    assert files == [
        *sources,
        "faq-pages/choosing.html",
        "faq-pages/faqinfo.html",
        "faq-pages/pkgtools.html",
    ]  # no index page, no .html link read twice, no stylesheet
    assert dataset.documents == 8


def test_the_rest_of_a_chapter_is_a_page_without_its_questions(faq: Path, tmp_path: Path) -> None:
    dataset = build_dataset(faq, tmp_path / "corpus")
    choosing = _text(dataset.corpus_dir / "faq-pages" / "choosing.html")
    assert "helps you pick one" in choosing
    assert "?" not in choosing  # neither the questions, the table of contents nor the xref title
    assert "Section 8.2" in choosing  # the cross-reference keeps its number
    info = _text(dataset.corpus_dir / "faq-pages" / "faqinfo.html")
    assert "Authors" in info and "Report mistakes as bugs." in info
    assert "graphical" in _text(dataset.corpus_dir / "faq-pages" / "pkgtools.html")


def test_a_chapter_of_questions_only_has_no_rest_page() -> None:
    pairs, rest = chapter_questions(CHOOSING.replace("helps you pick one", ""))
    assert len(pairs) == 3 and rest  # the xref paragraph is still text
    only = CHOOSING.split("<p>\nDebian offers")[0] + CHOOSING.split("</a>.\n</p>")[1]
    assert chapter_questions(only)[1] == ""


def test_sampling_keeps_every_answer(faq: Path, tmp_path: Path) -> None:
    full = build_dataset(faq, tmp_path / "a")
    some = build_dataset(faq, tmp_path / "b", sample=0.01)
    assert len(some.questions) == len(full.questions)
    assert some.documents < full.documents and some.fingerprint != full.fingerprint


def test_the_fingerprint_follows_the_content(faq: Path, tmp_path: Path) -> None:
    first = build_dataset(faq, tmp_path / "a").fingerprint
    assert build_dataset(faq, tmp_path / "b").fingerprint == first
    page = faq / "pkgtools.en.html"
    page.write_text(page.read_text().replace("before a colon", "before its colon"))
    assert build_dataset(faq, tmp_path / "c").fingerprint != first


def test_missing_data_names_the_make_target(tmp_path: Path) -> None:
    with pytest.raises(EvalDataMissing, match="make eval-data") as caught:
        require_faq(tmp_path / "nothing-here")
    assert "apt-get download debian-faq" in str(caught.value)
    (tmp_path / "empty" / "debian-faq" / "FAQ").mkdir(parents=True)
    (tmp_path / "empty" / "debian-faq" / "FAQ" / "index.en.html").write_text("<html></html>")
    with pytest.raises(EvalDataMissing, match="make eval-data"):
        build_dataset(require_faq(tmp_path / "empty"), tmp_path / "corpus")
