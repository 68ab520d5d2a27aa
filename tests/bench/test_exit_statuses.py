"""``ragtime bench``'s exit statuses agree with docs/cli.md's table (issue 43 §4): 1 when the
command cannot do its work (no questions in its file, eval data not fetched, no tesseract), 2
only for a malformed command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main


def test_a_questions_file_with_no_question_is_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "questions.txt"
    empty.write_text("\n\n")
    assert main(["bench", "load", "--floor", "--questions", str(empty)]) == 1
    assert f"error: no questions in {empty}" in capsys.readouterr().err


def test_eval_data_not_fetched_is_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "quality", "--python-faq", str(tmp_path / "none"), "--work-dir", str(tmp_path)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_ocr_without_tesseract_is_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import retrieval.formats.ocr as ocr

    monkeypatch.setattr(ocr, "find_tesseract", lambda: None)
    assert main(["bench", "ocr"]) == 1
    assert "error: OCR needs" in capsys.readouterr().err
