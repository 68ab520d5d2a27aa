"""``ragtime bench documents``: the folder it builds, and a small run end to end."""

from __future__ import annotations

import json
from email import message_from_bytes
from pathlib import Path

import pytest

from app.cli.commands import main
from bench.suites.documents import build_folder


def test_the_folder_holds_e_mails_with_five_attachments_and_copies(tmp_path: Path) -> None:
    facts = build_folder(tmp_path, threads=2, copies=1)
    mails = sorted((tmp_path / "mail").glob("*.eml"))
    assert [m.name for m in mails] == ["thread-00.eml", "thread-01.eml"]
    message = message_from_bytes(mails[0].read_bytes())
    names = [part.get_filename() for part in message.walk() if part.get_filename()]
    attached = ["invoice-00.pdf", "lease-00.docx", "stock-00.xlsx", "tickets-00.csv"]
    assert names == [*attached, "receipt-00.png"]
    original, copy = (
        tmp_path / "files/contract-0.pdf",
        tmp_path / "files/backup/contract-0-copy.pdf",
    )
    assert original.read_bytes() == copy.read_bytes()
    assert [f.kind for f in facts] == ["pdf", "docx", "xlsx", "csv", "image"] * 2 + ["copy"]
    assert facts[0].source == "mail/thread-00.eml#invoice-00.pdf"
    assert facts[0].message == "mail/thread-00.eml"


@pytest.mark.slow
def test_a_small_run_finds_every_number_by_keyword(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real ingest (MiniLM, Tesseract for the receipts) and search: each file's number is
    found first by keyword and hybrid search, each attachment's hit names its e-mail, and the
    copy's hit names both files."""
    out = tmp_path / "documents.json"
    argv = ["bench", "documents", "--threads", "2", "--copies", "1", "--json", str(out)]
    assert main(argv) == 0
    result = json.loads(out.read_text())
    assert result["attachments"] == 10 and result["copies_recorded"] == 1
    assert result["failures"] == [] and result["tesseract"] is True
    for mode in ("keyword", "hybrid"):
        for kind, figures in result["kinds"][mode].items():
            assert figures["first"] == figures["queries"] == figures["named"], (mode, kind)
    assert "| hybrid | image | 2 | 2 | 2 | 2 |" in capsys.readouterr().out


def test_no_e_mails_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "documents", "--threads", "0"]) == 2
    assert "--threads must be 1 or more" in capsys.readouterr().err
