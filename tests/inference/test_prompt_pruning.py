"""Context pruning: each passage's sentences closest to the question, in rounds, within the
budget, with a one-token-per-word tokenizer."""

from __future__ import annotations

import pytest

from inference import PromptAssembler
from retrieval.store.sentences import ScoredPiece
from tests.fakes.passages import Doc
from tests.fakes.word_tokenizer import WordTokenizer

HEADER = 5  # "[n] Title — Section (doc.txt)"
GAP = 1  # " … "


def passage(*sentences: str) -> Doc:
    return Doc(" ".join(sentences), title="Title", section="Section", source="doc.txt")


def pieces(sentences: list[str], scores: list[float | None]) -> list[ScoredPiece]:
    return [ScoredPiece(s + " ", score) for s, score in zip(sentences, scores, strict=True)]


A = ["Alpha one two.", "Beta three four.", "Gamma five six.", "Delta seven eight.", "Eps nine ten."]
A_SCORES: list[float | None] = [0.1, 0.2, 0.9, 0.3, 0.1]


def assemble(budget: int, docs: list[Doc], scored: list[list[ScoredPiece]]):  # type: ignore[no-untyped-def]
    return PromptAssembler(WordTokenizer()).assemble(
        "why?", docs, context_tokens=budget, pieces=scored
    )


def test_the_best_sentence_comes_with_its_neighbours_in_text_order() -> None:
    prompt = assemble(HEADER + 9, [passage(*A)], [pieces(A, A_SCORES)])
    (only,) = prompt.passages
    assert only.text == "Beta three four. Gamma five six. Delta seven eight."
    assert only.truncated and prompt.pruned
    assert prompt.context_tokens_used == HEADER + 9


def test_fewer_neighbours_when_all_three_do_not_fit() -> None:
    prompt = assemble(HEADER + 6, [passage(*A)], [pieces(A, A_SCORES)])
    assert [p.text for p in prompt.passages] == ["Gamma five six. Delta seven eight."]
    prompt = assemble(HEADER + 4, [passage(*A)], [pieces(A, A_SCORES)])
    assert [p.text for p in prompt.passages] == ["Gamma five six."]


def test_every_passage_gets_its_best_sentence_before_any_gets_a_second() -> None:
    b = ["Zeta one one.", "Eta two two.", "Theta three three."]
    docs = [passage(*A), passage(*b)]
    scored = [pieces(A, A_SCORES), pieces(b, [0.1, 0.1, 0.8])]
    prompt = assemble(HEADER + 9 + HEADER + 6, docs, scored)
    assert [(p.label, p.text) for p in prompt.passages] == [
        (1, "Beta three four. Gamma five six. Delta seven eight."),
        (2, "Eta two two. Theta three three."),
    ]
    assert prompt.context_tokens_used <= HEADER + 9 + HEADER + 6


def test_sentences_apart_are_joined_by_a_gap() -> None:
    seven = [f"S{i} w w." for i in range(7)]
    scored = pieces(seven, [0.2, 0.9, 0.2, 0.0, 0.2, 0.8, 0.2])
    prompt = assemble(HEADER + 18 + GAP, [passage(*seven)], [scored])
    (only,) = prompt.passages
    assert only.text == "S0 w w. S1 w w. S2 w w. … S4 w w. S5 w w. S6 w w."
    assert "S3" not in prompt.text


def test_unscored_passages_are_taken_in_their_order_and_whole_when_they_fit() -> None:
    prompt = assemble(100, [passage(*A)], [pieces(A, [None] * 5)])
    (only,) = prompt.passages
    assert only.text == " ".join(A) and not only.truncated
    prompt = assemble(HEADER + 6, [passage(*A)], [pieces(A, [None] * 5)])
    assert [p.text for p in prompt.passages] == ["Alpha one two. Beta three four."]


def test_a_passage_with_nothing_that_fits_is_dropped_and_labels_stay_contiguous() -> None:
    long_ = ["one two three four five six seven eight nine ten eleven."]
    short = ["a b c."]
    docs = [passage(*long_), passage(*short)]
    prompt = assemble(HEADER + 3, docs, [pieces(long_, [0.9]), pieces(short, [0.1])])
    assert [(p.label, p.text) for p in prompt.passages] == [(1, "a b c.")]
    assert prompt.dropped == 1
    assert "[1] Title" in prompt.text and "eleven" not in prompt.text


def test_the_same_inputs_give_the_same_bytes() -> None:
    args = (HEADER + 9, [passage(*A)], [pieces(A, A_SCORES)])
    assert assemble(*args).text == assemble(*args).text


def test_one_list_of_pieces_per_passage() -> None:
    with pytest.raises(ValueError, match="1 lists of pieces for 2 passages"):
        assemble(100, [passage(*A), passage(*A)], [pieces(A, A_SCORES)])
