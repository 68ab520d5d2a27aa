"""The figures of ``ragtime eval answers`` (app/evaluation/report.py): a run's row counts loops,
the modes that wrote the answers, abstentions by the server's verdict (none from a server that
gives none), grounded precision and recall, and the answer's p95; the Markdown is two tables
keyed by mode, budget and TTFT target; every answer's JSON carries its mode, verdict, finish
reason and loop."""

from __future__ import annotations

from typing import Any

from app.evaluation.dataset import Case
from app.evaluation.report import answers_json, markdown, summarise
from app.evaluation.scoring import Scored

LOOPING = "The answer is:\n\n" * 20
ABSTAINED = "The documents do not answer this."


def case(kind: str, n: int = 0) -> Case:
    fields: dict[str, Any] = {"id": f"{kind}-{n}", "kind": kind, "question": "How?"}
    if kind != "unanswerable":
        fields |= {"sources": [{"source": "a.md", "section": ""}], "facts": [["x=1"]]}
    if kind == "planted":
        fields |= {"planted": "p.md", "canary": "ZEBRA"}
    return Case.model_validate(fields)


def answer(
    kind: str, text: str, *, mode: str | None, n: int = 0, total_ms: float = 1000.0, **report: Any
) -> Scored:
    if mode is not None:
        report |= {"answer_mode": mode, "answerable": mode != "abstain"}
    report.setdefault("finish_reason", "stop")
    return Scored(case(kind, n), 200, text, ttft_ms=100.0, total_ms=total_ms, report=report)


def a_run() -> list[Scored]:
    """Four answerable questions (two right, one of them grounded; a wrong one grounded; one
    abstained), two unanswerable (one abstained), one planted, one cut by its deadline."""
    return [
        answer("answerable", "x=1 [1].", mode="generate", n=1, grounded=True),
        answer("answerable", "x=1.", mode="extract", n=2, grounded=False),
        answer("answerable", LOOPING, mode="generate", n=3, grounded=True, total_ms=9000.0),
        answer("answerable", ABSTAINED, mode="abstain", n=4),
        answer("unanswerable", ABSTAINED, mode="abstain", n=5),
        answer("unanswerable", "It is 42.", mode="generate", n=6, finish_reason="length"),
        answer("planted", "x=1 ZEBRA", mode="generate", n=7),
        Scored(case("unanswerable", 8), 504, "", error="deadline"),
    ]


def test_a_row_counts_loops_modes_abstentions_and_grounded_recall() -> None:
    row = summarise(a_run(), budget_ms=4000, ttft_target_ms=None, mode="auto")
    assert row.mode == "auto" and (row.answered, row.deadline) == (7, 1)
    # The repeated line, and the answer that ran to the token cap with no budget cap.
    assert row.loops == round(2 / 7, 3)
    assert row.answer_modes == {"abstain": 2, "extract": 1, "generate": 4}
    # One of three unanswerable (the 504 is counted, not abstained); one of four answerable.
    assert row.abstained == 0.333 and row.abstained_answerable == 0.25
    # Refusals in words or by the verdict: both abstentions are refusals.
    assert row.refused_unanswerable == 0.333 and row.refused_answerable == 0.25
    # Marked grounded: n=1 (right) and n=3 (wrong); right: n=1 and n=2 (one grounded).
    assert row.grounded_right == 0.5 and row.grounded_recall == 0.5
    assert row.total_ms_p50 == 1000.0 and row.total_ms_p95 == 9000.0


def test_a_server_that_does_not_judge_answerability_leaves_abstentions_unknown() -> None:
    older = [
        answer("answerable", "x=1 [1].", mode=None, n=1),
        answer("unanswerable", "I don't know.", mode=None, n=2),
    ]
    row = summarise(older, budget_ms=None, ttft_target_ms=None)
    assert row.abstained is None and row.abstained_answerable is None
    assert row.answer_modes == {} and row.mode is None and row.refused_unanswerable == 1.0
    lines = markdown([row]).splitlines()
    assert "| default | default | none | 100% |" in "\n".join(lines)
    assert "| 100% / – | 0% / – |" in lines[4]
    assert lines[-1].startswith("| default | default | none | 2/2 (0) | – | 0% |")


def test_the_markdown_is_two_tables_keyed_by_mode_budget_and_target() -> None:
    rows = [
        summarise(a_run(), budget_ms=1500, ttft_target_ms=None, mode="generate"),
        summarise(a_run(), budget_ms=15000, ttft_target_ms=600, mode="extract"),
    ]
    text = markdown(rows)
    quality, outcomes = text.split("\n\nOutcomes and timings (as the client saw them):\n\n")
    quality_lines, outcome_lines = quality.splitlines()[2:], outcomes.splitlines()
    assert quality_lines[0].startswith("| mode | budget ms | TTFT target ms | key facts |")
    assert "grounded precision | grounded recall" in quality_lines[0]
    assert outcome_lines[0].startswith("| mode | budget ms | TTFT target ms | answered (504) |")
    assert len(quality_lines) == len(outcome_lines) == 4
    assert quality_lines[3].startswith("| extract | 15000 | 600 | 50% |")
    assert outcome_lines[2].startswith(
        "| generate | 1500 | none | 7/8 (1) | abstain 2, extract 1, generate 4 | 29% | 100 | "
        "1000 / 9000 |"
    )
    # Readable: no table is wider than the old single one (13 columns).
    assert all(line.count("|") - 1 <= 13 for line in text.splitlines() if line.startswith("|"))


def test_every_answer_carries_its_mode_verdict_finish_and_loop() -> None:
    answers = {a["id"]: a for a in answers_json(a_run())}

    def carried(name: str) -> tuple[object, ...]:
        a = answers[name]
        return a["answer_mode"], a["answerable"], a["finish_reason"], a["loop"]

    assert carried("answerable-1") == ("generate", True, "stop", False)
    assert carried("answerable-3") == ("generate", True, "stop", True)  # the repeated line
    assert carried("unanswerable-5") == ("abstain", False, "stop", False)
    assert carried("unanswerable-6") == ("generate", True, "length", True)  # the token cap
    assert carried("unanswerable-8") == (None, None, None, False)  # cut: no report
