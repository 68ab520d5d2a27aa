"""The shipped ``debian-faq`` answer set (demo/answers/debian-faq.jsonl) and its documents,
built from the Debian FAQ that ``make eval-data`` fetches (app/evaluation/debian_faq.py): the
set is whole; its documents are each chapter with its questions as headings, from the tiny
hand-made FAQ; missing data is an error naming the make target; and, where the real FAQ has been
fetched, every label points at a heading of its document and every fact is in its passage."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import commands as cli
from app.evaluation.dataset import (
    ROOT,
    SHIPPED,
    DatasetError,
    corpus_files,
    load_dataset,
    read_cases,
)
from app.evaluation.debian_faq import CORPUS_DIR, build_corpus
from app.evaluation.scoring import occurs
from app.settings import get_settings
from retrieval.eval.debian_faq import faq_dir
from retrieval.formats import Document, parse_file
from tests.helpers.debian_faq_tree import write_faq

#: The words of each unanswerable question that the FAQ must not hold (checked on the real one).
UNANSWERED_TERMS = {
    "nginx-reverse-proxy": ("nginx", "reverse proxy"),
    "wireguard-vpn": ("wireguard", "vpn"),
    "pacman-arch": ("pacman", "arch linux"),
    "dnf-vs-yum": ("dnf", "yum", "fedora"),
    "flatpak-apps": ("flatpak", "flathub"),
    "secure-boot": ("secure boot", "mokutil"),
    "luks-encryption": ("luks", "passphrase"),
    "postfix-gmail-relay": ("postfix", "gmail"),
    "docker-compose": ("docker", "compose"),
    "banana-bread": ("banana", "recipe"),
    "world-cup-2018": ("world cup", "fifa"),
    "capital-australia": ("australia", "capital"),
}


def _eval_data() -> Path:
    """Where ``make eval-data`` put its downloads: EVAL_DATA, else the checkout's default."""
    return Path(os.environ.get("EVAL_DATA") or ROOT / ".ragtime" / "eval")


def _headings(document: Document) -> set[str]:
    return {heading for block in document.blocks for heading in block.path}


def _passage(document: Document, section: str) -> str:
    """The text of the blocks under ``section`` (the whole document for ""), headings left out."""
    wanted = section.lower()
    return "\n".join(
        block.text
        for block in document.blocks
        if not wanted or wanted in (h.lower() for h in block.path)
    )


def test_the_set_holds_questions_of_both_kinds_labelled_by_chapter() -> None:
    cases = read_cases(SHIPPED["debian-faq"].cases)
    kinds = Counter(c.kind for c in cases)
    assert 30 <= kinds["answerable"] <= 45 and 10 <= kinds["unanswerable"] <= 12
    assert set(kinds) == {"answerable", "unanswerable"}
    for case in cases:
        for label in case.sources:  # a chapter's file, named as the corpus names it
            assert label.source.endswith(".html") and "/" not in label.source, case.id
            assert label.section, case.id  # the question's heading, never the whole chapter
        assert all(len(alternatives) >= 1 for alternatives in case.facts)
    unanswerable = {c.id for c in cases if c.kind == "unanswerable"}
    assert unanswerable == set(UNANSWERED_TERMS)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data dir with the tiny hand-made FAQ where ``make eval-data`` puts the real one."""
    write_faq(tmp_path / "data" / "eval")
    return tmp_path / "data"


def test_each_chapter_is_a_document_headed_by_its_questions(data_dir: Path) -> None:
    dataset = load_dataset("debian-faq", data_dir=data_dir)
    assert dataset.corpus == (data_dir / CORPUS_DIR,)
    files = {p.name: p for p in corpus_files(dataset)}
    assert sorted(files) == ["choosing.html", "faqinfo.html", "pkgtools.html"]  # no index
    choosing = parse_file(files["choosing.html"])
    assert choosing.title == "Chapter 3. Choosing a Debian distribution"
    assert {  # the questions' words without their numbers; the empty answer's question left out
        "Which Debian distribution should I run?",
        "Can I move from stable to testing later?",
        "Does unstable ever get frozen?",
    } <= _headings(choosing)
    assert "Why was my question left without an answer?" not in _headings(choosing)
    run = _passage(choosing, "Which Debian distribution should I run?")
    assert "security fixes" in run and "full upgrade" not in run  # 3.1.1 is its own question
    intro = _passage(choosing, "")
    assert "helps you pick one" in intro and "Section 8.2" in intro
    assert "Table of Contents" not in intro and "owns a file?" not in intro  # toc, xref titles
    tools = parse_file(files["pkgtools.html"])
    question = "What programs does Debian provide for managing its packages?"
    assert any(b.path[-2:] == (question, "8.1.1. dpkg") for b in tools.blocks)  # kept inside
    owns = _passage(tools, "How can I tell which package owns a file?")
    assert "dpkg --search /usr/bin/less" in owns
    # Built again from the same data: the same documents, nothing left over.
    (data_dir / CORPUS_DIR / "stale.html").write_text("<p>old</p>")
    assert sorted(p.name for p in corpus_files(load_dataset("debian-faq", data_dir=data_dir))) == [
        "choosing.html",
        "faqinfo.html",
        "pkgtools.html",
    ]


def test_without_the_data_the_set_is_an_error_naming_make_eval_data(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="make eval-data") as caught:
        load_dataset("debian-faq", data_dir=tmp_path / "data")
    assert str(caught.value).startswith("debian-faq: ")
    assert str(tmp_path / "data" / "eval" / "debian-faq" / "FAQ") in str(caught.value)
    assert not (tmp_path / "data" / CORPUS_DIR).exists()
    # The other shipped set needs no downloaded data.
    assert corpus_files(load_dataset("python-docs", data_dir=tmp_path / "data"))


@pytest.fixture
def settings_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("RAGTIME_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield tmp_path / "data"
    get_settings.cache_clear()


def test_the_cli_says_which_target_fetches_the_data(
    settings_data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["eval", "answers", "--dataset", "debian-faq", "--url", "http://127.0.0.1:9"]
    assert cli.main([*argv, "--key", "rt_x"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: debian-faq: ") and "\n" not in err
    assert "make eval-data" in err and str(settings_data_dir / "eval") in err


@pytest.fixture(scope="module")
def real_corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Document]:
    faq = faq_dir(_eval_data())
    if not (faq / "index.en.html").is_file():
        pytest.skip(f"the Debian FAQ is not fetched ({faq}): run `make eval-data`")
    out = build_corpus(faq, tmp_path_factory.mktemp("debian-faq") / "corpus")
    return {p.name: parse_file(p) for p in sorted(out.iterdir())}


def test_each_label_is_a_heading_of_its_document_and_holds_its_facts(
    real_corpus: dict[str, Document],
) -> None:
    """A fact no labelled passage holds could never be read from the documents: a label that
    is wrong, or a fact from outside them."""
    for case in read_cases(SHIPPED["debian-faq"].cases):
        passages = []
        for label in case.sources:
            assert label.source in real_corpus, (case.id, label.source)
            document = real_corpus[label.source]
            assert label.section in _headings(document), (case.id, label.section)
            passages.append(_passage(document, label.section))
        text = "\n".join(passages)
        for alternatives in case.facts:
            assert any(occurs(a, text) for a in alternatives), (case.id, alternatives)


def test_no_unanswerable_question_is_answered_by_the_faq(
    real_corpus: dict[str, Document],
) -> None:
    everything = "\n".join(
        " ".join([*block.path, block.text])
        for document in real_corpus.values()
        for block in document.blocks
    )
    for case_id, terms in UNANSWERED_TERMS.items():
        assert not [t for t in terms if occurs(t, everything)], case_id
