"""The injection screen and the PII redaction hold their precision and recall on the labelled
sets of ``bench/suites/safety/labelled_sets.py`` and the demo corpus (all clean); ``ragtime
bench safety`` prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.commands import main
from bench.suites.safety.labelled_sets import CLEAN, HELD_OUT_HOSTILE, HOSTILE, PII
from bench.suites.safety.scoring import SafetyResult, measure


@pytest.fixture(scope="module")
def result() -> SafetyResult:
    return measure()


def test_the_labelled_sets_are_large_enough() -> None:
    assert len(HOSTILE) >= 40 and len(CLEAN) >= 40 and len(PII) >= 50
    assert sum(1 for _, kinds in PII if not kinds) >= 15  # look-alikes that hold nothing
    assert len(HELD_OUT_HOSTILE) >= 15


def test_the_injection_screen_meets_its_minimums(result: SafetyResult) -> None:
    assert result.injection.recall >= 0.9, result.injection
    assert result.injection.precision >= 0.97, result.injection
    assert len(result.corpus_flagged) <= 2, result.corpus_flagged  # of ~800 clean passages
    # Its speed (screen_ms_per_passage) is a figure of `ragtime bench safety`, not a test's.


def test_the_held_out_figures_do_not_regress(result: SafetyResult) -> None:
    """The set never tuned on: the screen's recall there is far below its in-sample recall
    (regexes generalise poorly); these floors are today's figures, to catch a regression."""
    assert result.held_out_injection.precision >= 0.95, result.held_out_injection
    assert result.held_out_injection.recall >= 0.45, result.held_out_injection
    assert result.held_out_pii.precision >= 0.9 and result.held_out_pii.recall >= 0.9


def test_the_redaction_meets_its_minimums(result: SafetyResult) -> None:
    assert result.pii.recall >= 0.95 and result.pii.precision >= 0.95, result.pii
    for kind, scores in result.pii_by_kind.items():
        assert scores.recall >= 0.9 and scores.precision >= 0.9, (kind, scores)
    # The demo corpus (the Python docs) holds e-mail addresses, and nothing else to redact.
    assert set(result.corpus_redactions) <= {"email"}, result.corpus_redactions


def test_the_bench_command_prints_and_writes_the_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "corpus"  # a small one: the figures on the demo corpus are tested above
    corpus.mkdir()
    (corpus / "a.md").write_text("Lists\n=====\n\nLists are mutable; append() adds an item.\n")
    out = tmp_path / "safety.json"
    assert main(["bench", "safety", "--corpus", str(corpus), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "injection screen:" in printed and "PII redaction:" in printed
    assert "precision" in printed and "recall" in printed
    figures = json.loads(out.read_text())
    assert figures["injection"]["tp"] > 0 and figures["pii"]["tp"] > 0
