"""An e-mail's attachments are documents of their own (issue 23 §3): a PDF, a DOCX, an XLSX and
a CSV attached to a real message are searchable as ``thread.eml#<name>``, each hit naming its
message; the PNG is the attachment's failure, not the message's; the attachments are replaced
and removed with their message, and read within the limits of a file."""

from __future__ import annotations

import re
from email.message import EmailMessage
from pathlib import Path

import pytest

from retrieval import DocumentStore, LimitExceeded, ParseLimits, SearchFilter, ingest_path
from retrieval.formats import parse_with_attachments
from retrieval.ingest.files import DocumentReader
from retrieval.ingest.prepared import prepare_documents
from retrieval.ingest.tokens import approximate_tokens
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.carried_documents import (
    BODY_TEXT,
    CSV_TEXT,
    DOCX_TEXT,
    PDF_TEXT,
    make_thread,
    pdf_bytes,
)

ATTACHED = {
    "thread.eml#report.pdf": ("pdf", PDF_TEXT),
    "thread.eml#catering.docx": ("docx", DOCX_TEXT),
    "thread.eml#hangars.xlsx": ("xlsx", "Zeppelin hangar rented Friedrichshafen"),
    "thread.eml#zoo.csv": ("csv", CSV_TEXT.replace(",", " ")),
}


@pytest.fixture
def mail(tmp_path: Path) -> Path:
    folder = tmp_path / "mail"
    folder.mkdir()
    make_thread(folder / "thread.eml")
    return folder


def _top(store: DocumentStore, query: str, prefix: str = "") -> tuple[str, str, str]:
    embedder = HashEmbedder()
    [hit] = store.search("mail", embedder.embed([query])[0], 1, SearchFilter(prefix))
    return hit.source, hit.message, hit.kind


@pytest.mark.process
def test_each_attachment_is_a_source_of_its_own_that_names_its_message(
    mail: Path, store: DocumentStore
) -> None:
    report = ingest_path(mail, collection="mail", embedder=HashEmbedder(), store=store)
    assert store.sources("mail") == sorted(["thread.eml", *ATTACHED])
    assert report.files == 1 and report.added == ["thread.eml"]
    assert sorted(report.attachments) == sorted((a, "thread.eml") for a in ATTACHED)
    # The blank PNG is the attachment's failure (needs OCR, or OCR read nothing): not the mail's.
    [(failed, reason)] = report.failures
    assert failed == "thread.eml#chart.png" and reason
    for source, (kind, text) in ATTACHED.items():
        assert _top(store, text) == (source, "thread.eml", kind)
        assert _top(store, text, prefix=source) == (source, "thread.eml", kind)
    assert _top(store, BODY_TEXT) == ("thread.eml", "", "eml")
    snapshot = store.snapshot("mail")
    assert snapshot is not None
    record = snapshot.manifest.files["thread.eml#report.pdf"]
    assert record.message == "thread.eml" and record.chunks >= 1
    assert not snapshot.manifest.files["thread.eml"].message


@pytest.mark.process
def test_attachments_are_replaced_and_removed_with_their_message(
    mail: Path, store: DocumentStore
) -> None:
    ingest_path(mail, collection="mail", embedder=HashEmbedder(), store=store)
    again = ingest_path(mail, collection="mail", embedder=HashEmbedder(), store=store)
    assert again.unchanged == ["thread.eml"] and again.snapshot is None  # attachments and all
    # The message now carries one attachment, the PDF: the others go.
    message = EmailMessage()
    message["Subject"] = "Inspection papers, again"
    message.set_content("Only the report this time.")
    message.add_attachment(
        pdf_bytes(), maintype="application", subtype="pdf", filename="report.pdf"
    )
    (mail / "thread.eml").write_bytes(bytes(message))
    changed = ingest_path(mail, collection="mail", embedder=HashEmbedder(), store=store)
    assert changed.changed == ["thread.eml"]
    assert store.sources("mail") == ["thread.eml", "thread.eml#report.pdf"]
    (mail / "thread.eml").unlink()
    (mail / "other.md").write_text("# Other\n\nSomething else to keep the folder.\n")
    removed = ingest_path(mail, collection="mail", embedder=HashEmbedder(), store=store)
    assert removed.removed == ["thread.eml"]
    assert store.sources("mail") == ["other.md"]


@pytest.mark.process
def test_an_attachment_over_a_limit_is_its_own_failure(mail: Path, store: DocumentStore) -> None:
    message = EmailMessage()
    message["Subject"] = "Long report"
    message.set_content("The long report is attached.")
    pdf = pdf_bytes("\n".join(f"Line {n}." for n in range(200)))  # several pages
    message.add_attachment(pdf, maintype="application", subtype="pdf", filename="long.pdf")
    (mail / "long.eml").write_bytes(bytes(message))
    limits = ParseLimits(max_pages=1)
    report = ingest_path(
        mail, collection="mail", embedder=HashEmbedder(), store=store, limits=limits
    )
    failures = dict(report.failures)
    assert "max_pages" in failures["long.eml#long.pdf"]
    assert "long.eml" in store.sources("mail") and "long.eml#long.pdf" not in store.sources("mail")
    # An upload over a limit is refused, naming the attachment.
    reader = DocumentReader(approximate_tokens, limits=limits)
    documents = [("long.eml", (mail / "long.eml").read_bytes())]
    with pytest.raises(LimitExceeded, match=re.escape("long.eml#long.pdf")):
        prepare_documents(documents, known={}, embedder=HashEmbedder(), reader=reader)


@pytest.mark.process
def test_the_chunks_of_a_message_and_its_attachments_count_together(mail: Path) -> None:
    """``max_chunks``: a message's embedding cost is its attachments' too."""
    data = (mail / "thread.eml").read_bytes()
    reader = DocumentReader(approximate_tokens, limits=ParseLimits(max_chunks=3))
    with pytest.raises(LimitExceeded, match="max_chunks"):
        prepare_documents([("t.eml", data)], known={}, embedder=HashEmbedder(), reader=reader)


def test_attachment_names_are_file_names_unique_in_their_message() -> None:
    message = EmailMessage()
    message["Subject"] = "Names"
    message.set_content("Three files.")
    for name in ("../../etc/report.pdf", "report.pdf", "C:\\Users\\ada\\notes.md"):
        message.add_attachment(
            b"# Notes\n\nText.\n", maintype="text", subtype="plain", filename=name
        )
    message.add_attachment(b"no name", maintype="application", subtype="octet-stream")
    forwarded = EmailMessage()
    forwarded["Subject"] = "Forwarded"
    forwarded.set_content("The forwarded words.")
    message.add_attachment(forwarded, filename="fwd.eml")
    _, attachments = parse_with_attachments(bytes(message), "m.eml")
    names = [a.name for a in attachments]
    assert names == ["report.pdf", "report (2).pdf", "notes.md", "fwd.eml"]
    assert b"The forwarded words." in attachments[-1].data
