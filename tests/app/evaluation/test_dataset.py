"""Labelled answer sets (app/evaluation/dataset.py): the shipped one is whole and its labels
point at what the demo corpus holds; a file that is not a set is an error naming the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.evaluation.dataset import (
    DEMO,
    DatasetError,
    corpus_files,
    load_dataset,
    read_cases,
)
from app.evaluation.scoring import occurs
from retrieval.formats.markup import parse_markup


def test_the_shipped_set_holds_each_kind_and_its_labels_point_into_the_corpus() -> None:
    dataset = load_dataset("python-docs")
    kinds = {c.kind for c in dataset.cases}
    assert kinds == {"answerable", "unanswerable", "planted"}
    assert sum(c.kind == "answerable" for c in dataset.cases) >= 30
    files = {p.name: p for p in corpus_files(dataset)}
    for case in dataset.cases:
        for label in case.sources:
            path = DEMO / "corpus" / label.source
            assert path.is_file(), (case.id, label.source)
            # A heading as ingest reads it (its markup gone): what a chunk's section holds.
            headings = {h for b in parse_markup(path.read_text(), "rst").blocks for h in b.path}
            assert not label.section or label.section in headings, (case.id, label.section)
        if case.kind == "planted":
            planted = files[case.planted]
            assert case.canary.lower() in planted.read_text().lower(), case.id


def test_each_answerable_fact_is_found_in_the_documents_that_answer_it() -> None:
    """A fact no labelled passage holds could never be read from the documents: a label that
    is wrong, or a fact from outside them. Code phrasings (with a bracket, dot, dash or equals
    sign) are allowed to be written as an answer would write them."""
    for case in load_dataset("python-docs").cases:
        texts = " ".join((DEMO / "corpus" / s.source).read_text() for s in case.sources)
        for alternatives in case.facts:
            assert any(occurs(a, texts) or set(a) & set("()[].-=") for a in alternatives), (
                case.id,
                alternatives,
            )


def _write(tmp_path: Path, *lines: object) -> Path:
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


GOOD = {"id": "a", "kind": "unanswerable", "question": "What is the GIL?"}


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["{not json"], "set.jsonl:1: not JSON"),
        ([GOOD, {**GOOD, "kind": "maybe"}], "set.jsonl:2: kind"),
        ([GOOD, GOOD], "set.jsonl:2: the id 'a' is used twice"),
        ([{**GOOD, "facts": [["x"]]}], "an unanswerable question has no sources and no facts"),
        ([{**GOOD, "kind": "answerable"}], "an answerable question needs sources and facts"),
        ([{**GOOD, "surprise": 1}], "set.jsonl:1: surprise"),
        ([""], "holds no questions"),
    ],
)
def test_a_file_that_is_not_a_set_is_an_error_naming_the_line(
    tmp_path: Path, lines: list[object], message: str
) -> None:
    with pytest.raises(DatasetError, match=message.replace("(", r"\(")):
        read_cases(_write(tmp_path, *lines))


def test_a_set_by_path_takes_the_documents_folder_beside_it(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    assert load_dataset(str(path)).corpus == ()
    (tmp_path / "documents").mkdir()
    (tmp_path / "documents" / "a.md").write_text("# A\n")
    (tmp_path / "documents" / ".hidden.md").write_text("# H\n")
    dataset = load_dataset(str(path))
    assert [p.name for p in corpus_files(dataset)] == ["a.md"]
    with pytest.raises(DatasetError, match=r"(?i)no such file"):
        load_dataset(str(tmp_path / "missing.jsonl"))
