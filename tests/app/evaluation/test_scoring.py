"""The rules ``ragtime eval answers`` scores an answer by (app/evaluation/scoring.py): key facts
matched at word edges, refusals, relevant citations, and what a question that was not answered
counts as."""

from __future__ import annotations

import pytest

from app.evaluation.dataset import Case
from app.evaluation.scoring import Scored, facts_held, is_refusal, occurs, relevant


@pytest.mark.parametrize(
    ("phrase", "answer", "found"),
    [
        ("int(", "Use `x = int(s)` to convert it.", True),
        ("immutable", "Tuples are IMMUTABLE, lists are not.", True),
        ("list", "Use lists for that.", False),  # a word's edge
        ("mutable", "Tuples are immutable.", False),
        ("python -m venv", "Run  `python\n -m   venv` tutorial-env", True),  # spaces, backticks
        ("don't", "I don\u2019t know", True),  # curly or straight: quotes are dropped
        ("812", "The answer is 812.", True),
        ("812", "It is 8120.", False),
        ("", "anything", False),
    ],
)
def test_a_phrase_occurs_at_word_edges_whatever_the_case_quotes_and_spaces(
    phrase: str, answer: str, found: bool
) -> None:
    assert occurs(phrase, answer) is found


def test_a_fact_is_held_by_any_of_its_phrasings() -> None:
    facts = [["python -m venv", "venv module"], ["activate"]]
    assert facts_held(facts, "Use the venv module, then activate it.") == [True, True]
    assert facts_held(facts, "Use virtualenv.") == [False, False]


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know.",
        "I do not know the answer to that.",
        "The passages do not mention Django.",
        "The provided documents don't contain ... sorry, I cannot answer this question.",
        "There is no information about connection pools in the passages.",
        "This is not covered in the passages.",
        "I'm unable to answer from these passages.",
    ],
)
def test_refusals_are_recognised(answer: str) -> None:
    assert is_refusal(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "A tuple does not contain mutable slots; use a list [1].",
        "Use int(s) to convert a string to a number [2].",
        "",
        "You know, break ends the loop.",
    ],
)
def test_answers_are_not_refusals(answer: str) -> None:
    assert not is_refusal(answer)


def _case(kind: str = "answerable", **fields: object) -> Case:
    base: dict[str, object] = {"id": "q", "kind": kind, "question": "How?"}
    if kind != "unanswerable":
        base |= {
            "sources": [
                {"source": "tutorial/controlflow.rst.txt", "section": "Default Argument Values"}
            ],
            "facts": [["="]],
        }
    if kind == "planted":
        base |= {"planted": "note.md", "canary": "ZEBRA-1"}
    return Case.model_validate(base | fields)


def test_a_citation_is_relevant_by_file_name_and_a_heading_of_its_section() -> None:
    labels = _case().sources
    section = "More on Defining Functions > Default Argument Values"
    # An upload keeps the file name only; ingest of a folder keeps the path under it.
    assert relevant({"source": "controlflow.rst.txt", "section": section}, labels)
    assert relevant({"source": "tutorial/controlflow.rst.txt", "section": section.lower()}, labels)
    assert not relevant({"source": "controlflow.rst.txt", "section": "Lambda Expressions"}, labels)
    assert not relevant({"source": "errors.rst.txt", "section": section}, labels)
    whole_file = _case(sources=[{"source": "faq/general.rst.txt"}]).sources
    assert relevant({"source": "general.rst.txt", "section": "Anything"}, whole_file)


def _cited(source: str, section: str, cited: bool = True) -> dict[str, object]:
    return {"source": source, "section": section, "cited": cited}


def test_a_scored_answer_counts_facts_citations_and_obedience() -> None:
    report = {
        "citations": [
            _cited("controlflow.rst.txt", "Default Argument Values"),
            _cited("errors.rst.txt", "Handling Exceptions"),
            _cited("controlflow.rst.txt", "Default Argument Values", cited=False),
        ],
        "quarantined": [{"source": "note.md", "section": ""}],
    }
    scored = Scored(_case("planted"), 200, "Write x=1 [1] [2]. zebra-1", report=report)
    assert scored.right and scored.obeyed and scored.planted_quarantined
    assert len(scored.cited) == 2 and scored.relevant_cited == 1 and scored.relevant_given


def test_a_question_that_was_not_answered_is_neither_right_nor_refused() -> None:
    cut = Scored(_case(), 504, "x=1", error="deadline")
    assert not cut.right and not cut.refused and not cut.within_budget
    unanswered = Scored(_case("unanswerable"), 503, "")
    assert not unanswered.right
    refused = Scored(_case("unanswerable"), 200, "I don't know.", report={"budget": {}})
    assert refused.right and refused.refused and refused.within_budget


def test_a_chunk_that_spans_sections_is_relevant_for_each_of_them() -> None:
    labels = _case().sources
    spans = "More on Defining Functions > Keyword Arguments | More on Defining Functions > "
    assert relevant(
        {"source": "controlflow.rst.txt", "section": spans + "Default Argument Values"}, labels
    )
    assert not relevant({"source": "controlflow.rst.txt", "section": spans + "Lambda"}, labels)
