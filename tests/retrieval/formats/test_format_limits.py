"""Parse limits (issue 24 §2): hostile files, built here, refused early and cheaply by name.

Zip bombs (declared and lying about their size), a paragraph bomb, a 5,000-page PDF, sheets and
CSV files of 200,000 rows, XML entities in Office packages; and files within the limits still
read. Big files are written as XML strings straight into a zip, never through an object model.
"""

from __future__ import annotations

import io
import tracemalloc
import zipfile
from email.message import EmailMessage
from pathlib import Path

import openpyxl
import pytest

import retrieval
from retrieval import LimitExceeded, ParseLimits, UnreadableDocument
from retrieval.formats import parse_bytes, parse_file
from tests.helpers.documents import make_docx, make_pdf, make_xlsx
from tests.helpers.hostile_documents import (
    LAUGHS,
    PARAGRAPH,
    S_NS,
    SECRET,
    XML,
    MiB,
    declaring,
    docx_with_body,
    pdf_of_blank_pages,
    sheet_rows,
    with_zeros,
    xlsx_with_sheets,
)


def test_limit_exceeded_is_an_unreadable_document_answered_413() -> None:
    assert issubclass(LimitExceeded, UnreadableDocument)
    assert LimitExceeded.status_code == 413
    error = LimitExceeded("5000 pages", limit="max_pages", value=2000, unit="pages")
    assert str(error) == "5000 pages: more than the limit of 2000 pages (max_pages)"
    assert (error.limit, error.value) == ("max_pages", 2000)
    assert retrieval.ParseLimits is ParseLimits
    assert ParseLimits() == ParseLimits(
        max_member_bytes=64 * MiB,
        max_inflated_bytes=256 * MiB,
        max_pages=2_000,
        max_rows=100_000,
        max_paragraphs=200_000,
    )


@pytest.mark.parametrize("name", ["bomb.docx", "bomb.xlsx"])
def test_zip_bomb_member_is_refused_by_its_declared_size(name: str) -> None:
    bomb = with_zeros(name, bomb=20 * MiB)
    assert len(bomb) < 100_000
    with pytest.raises(LimitExceeded, match=r"media/bomb\.bin declares 20971520 bytes") as exc:
        parse_bytes(bomb, name, ParseLimits(max_member_bytes=MiB))
    assert (exc.value.limit, exc.value.value) == ("max_member_bytes", MiB)


@pytest.mark.parametrize("name", ["liar.docx", "liar.xlsx"])
def test_zip_bomb_lying_about_its_size_is_refused_in_bounded_memory(name: str) -> None:
    """The headers declare 100 bytes; the member inflates to 20 MiB. It is inflated no further
    than the limit, and never held whole."""
    bomb = declaring(with_zeros(name, bomb=20 * MiB), "media/bomb.bin", 100)
    tracemalloc.start()
    try:
        with pytest.raises(LimitExceeded, match=r"bomb\.bin inflates to at least") as exc:
            parse_bytes(bomb, name, ParseLimits(max_member_bytes=MiB))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert exc.value.limit == "max_member_bytes"
    assert peak < 3 * MiB


@pytest.mark.parametrize("lying", [False, True])
def test_members_together_over_the_inflated_limit_are_refused(lying: bool) -> None:
    """Three members of 900 KiB pass the member limit of 1 MiB, not the total of 2 MiB."""
    package = with_zeros("many.docx", a=900 * 1024, b=900 * 1024, c=900 * 1024)
    if lying:
        for key in "abc":
            package = declaring(package, f"media/{key}.bin", 10)
    limits = ParseLimits(max_member_bytes=MiB, max_inflated_bytes=2 * MiB)
    with pytest.raises(LimitExceeded, match="inflate to at least" if lying else "declare") as exc:
        parse_bytes(package, "many.docx", limits)
    assert exc.value.limit == "max_inflated_bytes"


def test_member_compressed_with_a_method_office_does_not_use_is_refused() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("word/document.xml", b"<x/>", compress_type=zipfile.ZIP_BZIP2)
    with pytest.raises(UnreadableDocument, match="compression method 12"):
        parse_bytes(buffer.getvalue(), "odd.docx")


def test_paragraph_bomb_docx_is_refused_by_paragraph_count() -> None:
    bomb = docx_with_body("<w:p/>" * 1_000_000)
    assert len(bomb) < 50_000
    with pytest.raises(LimitExceeded) as exc:
        parse_bytes(bomb, "bomb.docx")
    assert str(exc.value) == (
        "at least 200001 paragraphs: more than the limit of 200000 paragraphs (max_paragraphs)"
    )


def test_docx_paragraphs_and_table_rows_count_up_to_the_limit() -> None:
    row = f"<w:tr><w:tc>{PARAGRAPH}</w:tc></w:tr>"
    body = PARAGRAPH * 3 + f"<w:tbl>{row * 2}</w:tbl>"  # 3 + 2 x (a row and its paragraph)
    assert (
        len(parse_bytes(docx_with_body(body), "ok.docx", ParseLimits(max_paragraphs=7)).blocks) == 4
    )
    with pytest.raises(LimitExceeded, match="7 paragraphs"):
        parse_bytes(docx_with_body(body), "over.docx", ParseLimits(max_paragraphs=6))


def test_pdf_of_5000_pages_is_refused_before_any_text_is_read() -> None:
    with pytest.raises(LimitExceeded) as exc:
        parse_bytes(pdf_of_blank_pages(5000), "long.pdf")
    assert str(exc.value) == "5000 pages: more than the limit of 2000 pages (max_pages)"
    assert (exc.value.limit, exc.value.value) == ("max_pages", 2000)


@pytest.mark.process
def test_limits_pass_through_parse_bytes_and_parse_file(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "two.pdf", [["Page one text."], ["Page two text."]])
    with pytest.raises(LimitExceeded, match=r"2 pages: .* limit of 1 pages \(max_pages\)"):
        parse_bytes(pdf.read_bytes(), "two.pdf", ParseLimits(max_pages=1))
    with pytest.raises(LimitExceeded, match="max_paragraphs"):
        parse_file(pdf, limits=ParseLimits(max_paragraphs=1))
    assert [b.page for b in parse_file(pdf, limits=ParseLimits(max_pages=2)).blocks] == [1, 2]


def test_xlsx_of_200000_rows_is_refused_by_its_declared_size() -> None:
    sheet = xlsx_with_sheets(sheet_rows(200_000), dimension="A1:A200000")
    with pytest.raises(LimitExceeded) as exc:
        parse_bytes(sheet, "big.xlsx")
    assert str(exc.value) == (
        "the sheets declare 200000 rows: more than the limit of 100000 rows (max_rows)"
    )


def test_xlsx_rows_of_all_sheets_count_as_they_stream() -> None:
    """Sheets that declare no size: the rows are counted as read, across sheets, and reading
    stops at the first row over the limit."""
    two_sheets = xlsx_with_sheets(sheet_rows(600), sheet_rows(600))
    with pytest.raises(LimitExceeded) as exc:
        parse_bytes(two_sheets, "two.xlsx", ParseLimits(max_rows=1000))
    assert str(exc.value).startswith("at least 1001 rows: more than the limit of 1000 rows")
    assert exc.value.limit == "max_rows"
    gap = xlsx_with_sheets(sheet_rows(1) + sheet_rows(1, start=1_000_000))  # openpyxl fills the gap
    with pytest.raises(LimitExceeded, match="max_rows"):
        parse_bytes(gap, "gap.xlsx", ParseLimits(max_rows=1000))


def test_xlsx_within_the_row_limit_reads() -> None:
    document = parse_bytes(xlsx_with_sheets(sheet_rows(3)), "small.xlsx", ParseLimits(max_rows=3))
    assert [b.text for b in document.blocks] == ["1: 2", "1: 3"]  # row 1 is the header row


def test_csv_of_200000_rows_is_refused() -> None:
    with pytest.raises(LimitExceeded) as exc:
        parse_bytes(b"a,b\n" + b"1,2\n" * 200_000, "big.csv")
    assert str(exc.value) == "at least 100001 rows: more than the limit of 100000 rows (max_rows)"


def test_csv_at_the_row_limit_reads() -> None:
    rows = b"a,b\n" + b"1,2\n" * 9
    assert len(parse_bytes(rows, "ten.csv", ParseLimits(max_rows=10)).blocks) == 9
    with pytest.raises(LimitExceeded, match="max_rows"):
        parse_bytes(rows + b"1,2\n", "eleven.csv", ParseLimits(max_rows=10))


@pytest.mark.parametrize("name", ["notes.md", "notes.txt", "notes.rst", "page.html"])
def test_markup_blocks_count_against_the_paragraph_limit(name: str) -> None:
    if name.endswith(".html"):
        text = "".join(f"<p>Paragraph {n}.</p>" for n in range(11))
    else:
        text = "\n\n".join(f"Paragraph {n}." for n in range(11))
    data = text.encode()
    assert len(parse_bytes(data, name, ParseLimits(max_paragraphs=11)).blocks) == 11
    with pytest.raises(LimitExceeded, match="max_paragraphs"):
        parse_bytes(data, name, ParseLimits(max_paragraphs=10))


def test_eml_attachment_over_the_paragraph_limit_is_refused_as_such() -> None:
    """A text attachment of no type ingest reads is read into the message (one of a type it
    reads is a document of its own, read within a file's limits:
    tests/retrieval/ingest/test_email_attachments.py)."""
    message = EmailMessage()
    message["Subject"] = "Minutes"
    message.set_content("See the attached minutes.")
    minutes = "\n\n".join(f"Point {n} was agreed." for n in range(50))
    message.add_attachment(minutes, subtype="plain", filename="minutes.log")
    data = bytes(message)
    assert len(parse_bytes(data, "m.eml", ParseLimits(max_paragraphs=52)).blocks) == 52
    with pytest.raises(LimitExceeded) as exc:
        parse_bytes(data, "m.eml", ParseLimits(max_paragraphs=51))
    assert type(exc.value) is LimitExceeded and exc.value.limit == "max_paragraphs"


def _external(secret: Path) -> str:
    return f'<!DOCTYPE x [<!ENTITY xxe SYSTEM "{secret.as_uri()}">{LAUGHS}]>'


def _texts_or_refused(data: bytes, name: str) -> list[str] | None:
    """The file's block texts, or None when it is refused as unreadable (safe too)."""
    try:
        return [block.text for block in parse_bytes(data, name).blocks]
    except UnreadableDocument:
        return None


def _workbook_citing(member: str, doctype: str, entity: str) -> bytes:
    """An XLSX whose header cell reads "Head <entity>", in the sheet's XML (inline) or in
    ``sharedStrings.xml``, that XML starting with ``doctype``."""
    data_row = sheet_rows(1, start=2)
    if member == "sheet":
        cell = f'<c r="A1" t="inlineStr"><is><t>Head {entity}</t></is></c>'
        return xlsx_with_sheets(f'<row r="1">{cell}</row>{data_row}', doctype=doctype)
    strings = (
        f'{XML}{doctype}<sst xmlns="{S_NS}" count="1" uniqueCount="1">'
        f"<si><t>Head {entity}</t></si></sst>"
    )
    return xlsx_with_sheets(
        f'<row r="1"><c r="A1" t="s"><v>0</v></c></row>{data_row}', shared_strings=strings
    )


@pytest.mark.parametrize("entity", ["&xxe;", "&lol9;"])
@pytest.mark.parametrize("member", ["sheet", "sharedStrings"])
def test_xlsx_expands_no_xml_entity(tmp_path: Path, entity: str, member: str) -> None:
    """External (file) and internal ("billion laughs") entities in sheet or shared-string XML:
    openpyxl parses through defusedxml, which refuses their declaration, and the refusal says
    so; nothing is read or expanded."""
    assert openpyxl.DEFUSEDXML is True
    plain = parse_bytes(_workbook_citing(member, "", ""), "plain.xlsx")
    assert [block.text for block in plain.blocks] == ["Head: 2"]  # the same file, no entity
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    attacked = _workbook_citing(member, _external(secret), entity)
    with pytest.raises(UnreadableDocument, match="XML entities are refused: EntitiesForbidden"):
        parse_bytes(attacked, "x.xlsx")


@pytest.mark.parametrize("entity", ["&xxe;", "&lol9;"])
def test_docx_expands_no_xml_entity(tmp_path: Path, entity: str) -> None:
    """python-docx parses with lxml and ``resolve_entities=False``: the entity is neither
    fetched nor expanded (lxml keeps it as a reference node, and the text before it)."""
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    body = f"<w:p><w:r><w:t>Before {entity} after.</w:t></w:r></w:p>"
    texts = _texts_or_refused(docx_with_body(body, doctype=_external(secret)), "x.docx")
    assert texts is None or (texts[0].startswith("Before") and len(texts[0]) < 20)
    assert texts is None or not any(SECRET in text for text in texts)


@pytest.mark.parametrize(
    ("maker", "name", "expected"),
    [
        (make_docx, "policy.docx", "Book trains at least two weeks ahead."),
        (make_xlsx, "staff.xlsx", "Name: Ada Lovelace; Role: Analyst; Office: London"),
    ],
)
def test_good_office_files_read_within_the_default_limits(
    tmp_path: Path, maker: object, name: str, expected: str
) -> None:
    assert callable(maker)
    assert expected in [block.text for block in parse_file(maker(tmp_path / name)).blocks]


@pytest.mark.process
def test_good_pdf_reads_within_the_default_limits(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "manual.pdf", [["The boiler starts with the red switch."]])
    assert [b.text for b in parse_file(pdf).blocks] == ["The boiler starts with the red switch."]
