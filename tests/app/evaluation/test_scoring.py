"""The rules ``ragtime eval answers`` scores an answer by (app/evaluation/scoring.py): key facts
matched at word edges, refusals, relevant citations, and what a question that was not answered
counts as."""

from __future__ import annotations

import pytest

from app.evaluation.dataset import Case
from app.evaluation.scoring import (
    Scored,
    facts_held,
    is_loop,
    is_refusal,
    loop_words,
    occurs,
    relevant,
    repeats_a_run,
    repeats_its_tail,
)


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


def _numbered(items: list[str]) -> str:
    return "\n".join(f"{n}. {item}" for n, item in enumerate(items, 1))


#: Answers a model wrote that loop (SmolLM2-135M's, shortened), and one of each rule's shapes.
LOOPS = {
    "a sentence again and again": "The capital of Australia is Canberra.\n\n" * 9,
    "a heading counting up": "".join(f"The answer is:\n\n[{n}]\n\n" for n in range(4, 18)),
    "a list counting 1 to 46": "The numbers are: " + ", ".join(map(str, range(1, 47))),
    "the same list item": _numbered(["Install the package with pip install name."] * 46),
    "calls counting up": "my_list = [1, 2]\n"
    + "".join(f"my_list.append({n})\n\n" for n in range(6, 15)),
    "a paragraph twice, cut mid-word": (
        "A module is a way of structuring Python's module namespace by using dotted module "
        "names. For example, the module name A.B designates a submodule named B in a module "
        "named A, so the authors of packages need not worry about each other's names.\n\n"
    )
    * 2
    + "A module is a way of struct",
}

#: Answers that do not loop, though words and lines recur in them.
NOT_LOOPS = {
    "three sentences": "Use sorted(xs) to get a new sorted list [1]. The list.sort() method sorts "
    "the list in place and returns None [1]. Both take a key function and reverse=True [2].",
    "prints of different things": "```python\nitems = [3, 1, 2]\nprint(items)\n"
    "print(len(items))\nprint(sorted(items))\nprint(sum(items) / len(items))\n"
    "print(items[0], items[-1])\n```\nEach print( call shows one fact about the list.",
    "a numbered list of steps": _numbered(
        ["Create the environment with python -m venv env.", "Activate it.", "Install with pip."]
    ),
    "dates and times": "The log shows three restarts: 2024-01-01 12:00:00, 2024-01-02 "
    "12:00:00 and 2024-01-03 12:00:00. Each came after an upgrade of the package, and none "
    "lost any data, as the journal of the service and the notes of the operators both say.",
    "a line said twice": "Use break to leave the loop. Use break to leave the loop.",
}


@pytest.mark.parametrize("text", LOOPS.values(), ids=LOOPS)
def test_an_answer_that_repeats_itself_loops(text: str) -> None:
    assert is_loop(text)
    assert Scored(_case(), 200, text, report={"finish_reason": "stop"}).loop


@pytest.mark.parametrize("text", NOT_LOOPS.values(), ids=NOT_LOOPS)
def test_an_answer_whose_words_recur_does_not_loop(text: str) -> None:
    assert not is_loop(text)


def test_each_loop_rule_alone() -> None:
    counting = loop_words("The numbers are: " + ", ".join(map(str, range(1, 47))))
    assert not repeats_a_run(counting) and repeats_its_tail(counting)  # runs of numbers only
    sentence = loop_words("Use break to leave the loop early. " * 3 + "Then return the value.")
    assert repeats_a_run(sentence) and not repeats_its_tail(sentence)


def test_running_to_the_token_cap_loops_unless_the_budget_capped_the_answer() -> None:
    text = NOT_LOOPS["three sentences"]
    capped = {"stage": "generate", "action": "output_capped", "reason": "budget"}
    fewer = {"stage": "retrieve", "action": "fewer_passages", "reason": "budget"}

    def scored(finish: str, *degradations: dict[str, str], status: int = 200) -> Scored:
        report = {"finish_reason": finish, "degradations": list(degradations)}
        return Scored(_case(), status, text, report=report)

    assert scored("length").loop and scored("length", fewer).capped_for_no_reason
    assert not scored("length", capped).loop and not scored("stop").loop
    assert not scored("deadline").loop
    assert not Scored(_case(), 504, LOOPS["a sentence again and again"]).loop  # not answered


def test_the_report_names_the_mode_and_its_verdict_and_an_older_one_neither() -> None:
    abstained = Scored(
        _case("unanswerable"),
        200,
        "No passage answers it.",  # not a refusal in words: the verdict makes it one
        report={"answer_mode": "abstain", "answerable": False, "finish_reason": "stop"},
    )
    assert abstained.refused and abstained.right
    assert (abstained.answer_mode, abstained.answerable) == ("abstain", False)
    older = Scored(_case(), 200, "Write x=1 [1].", report={"finish_reason": "stop"})
    assert (older.answer_mode, older.answerable, older.refused) == (None, None, False)
    extracted = Scored(_case(), 200, "x=1.", report={"answer_mode": "extract", "answerable": True})
    assert not extracted.refused and extracted.answer_mode == "extract"
