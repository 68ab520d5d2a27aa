"""The chunk-size measurement's data: questions never see themselves, every answer is findable."""

from __future__ import annotations

from collections import Counter

from bench.studies.chunk_size import (
    Passage,
    _relevant,
    load_corpus,
    plain_passages,
    ragtime_passages,
)


def test_questions_are_left_out_and_every_answer_has_passages() -> None:
    corpus = load_corpus()
    questions = {key for _, _, labelled in corpus for key, _ in labelled if key is not None}
    assert len(questions) > 150
    for passages in (ragtime_passages(corpus, 256, 32), plain_passages(corpus)):
        labelled = {key for p in passages for key in p.words if key is not None}
        assert labelled == questions
        text = "\n".join(p.text for p in passages)
        leaked = [q for _, path in questions if (q := path[-1]) in text and len(q) > 40]
        assert not leaked, leaked[:3]


def test_a_passage_is_relevant_when_mostly_the_answer_or_holding_most_of_it() -> None:
    key = ("faq/x.rst.txt", ("Why?",))
    other = ("faq/x.rst.txt", ("How?",))
    assert _relevant(Passage("", Counter({key: 60, other: 40})), key, 500)  # mostly the answer
    assert _relevant(Passage("", Counter({key: 30, other: 170})), key, 50)  # most of a short answer
    assert not _relevant(Passage("", Counter({key: 30, other: 170})), key, 500)
    assert not _relevant(Passage("", Counter({other: 10})), key, 10)
