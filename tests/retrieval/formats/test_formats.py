"""Document formats: each parser on small files the tests make, its failures, and safety."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from PIL import Image

from retrieval import NoTextLayer, UnreadableDocument
from retrieval.formats import (
    SUPPORTED_SUFFIXES,
    parse_bytes,
    parse_file,
    parse_with_attachments,
    stem_of,
    suffix_of,
)
from retrieval.ingest.chunking import chunk_document
from tests.helpers.documents import (
    make_broken,
    make_docx,
    make_eml,
    make_pdf,
    make_scanned_pdf,
    make_xlsx,
)

LONG_PAGE = [" ".join(f"Page filler sentence {i} about topic." for i in range(60))]


def _texts(path: Path) -> list[str]:
    return [block.text for block in parse_file(path).blocks]


@pytest.mark.parametrize(
    ("name", "suffix", "kind"),
    [
        ("guide.rst.txt", ".rst.txt", "rst"),
        ("GUIDE.MD", ".md", "md"),
        ("notes.txt", ".txt", "txt"),
        ("page.htm", ".htm", "html"),
        ("scan.JPG", ".jpg", None),
        ("data.tsv", None, None),
        (".md", None, None),
    ],
)
def test_suffixes_pick_their_parser(name: str, suffix: str | None, kind: str | None) -> None:
    assert suffix_of(name) == suffix
    if kind is not None:
        assert parse_bytes(b"# Head\n\nSome text.\n", name).kind == kind


def test_every_asked_format_is_registered() -> None:
    for suffix in (".md", ".rst", ".rst.txt", ".txt", ".html", ".pdf", ".docx", ".eml"):
        assert suffix in SUPPORTED_SUFFIXES
    assert ".xlsx" in SUPPORTED_SUFFIXES and ".csv" in SUPPORTED_SUFFIXES
    assert stem_of("tutorial/controlflow.rst.txt") == "controlflow"


def test_unsupported_type_is_refused_by_name() -> None:
    with pytest.raises(UnreadableDocument, match=r"unsupported file type: \.tsv"):
        parse_bytes(b"a\tb\n", "data.tsv")


def test_non_utf8_text_is_refused_with_the_reason() -> None:
    with pytest.raises(UnreadableDocument, match="not valid UTF-8"):
        parse_bytes(b"\xff\xfe\x00 bad \xc3\x28", "bad.md")


def test_markdown_section_paths_follow_heading_levels() -> None:
    text = (
        b"# Guide\n\nIntro.\n\n## Install\n\nRun it.\n\n### On Linux\n\nUse apt.\n\n## Use\n\nGo.\n"
    )
    document = parse_bytes(text, "guide.md")
    assert document.title == "Guide"
    assert [(b.path, b.text) for b in document.blocks] == [
        (("Guide",), "Intro."),
        (("Install",), "Run it."),
        (("Install", "On Linux"), "Use apt."),
        (("Use",), "Go."),
    ]
    (chunk,) = chunk_document(document, "guide.md")  # short sections share one chunk
    assert (chunk.title, chunk.kind) == ("Guide", "md")
    assert chunk.section == "Guide | Install | Install > On Linux | Use"  # each it holds
    assert chunk.text == "Intro.\n\nInstall\nRun it.\n\nOn Linux\nUse apt.\n\nUse\nGo."


def test_rest_levels_follow_the_order_styles_appear_in() -> None:
    text = b"=====\nTitle\n=====\n\nAa\n--\n\nOne.\n\nBb\n~~\n\nTwo.\n\nCc\n--\n\nThree.\n"
    document = parse_bytes(text, "t.rst")
    assert [b.path for b in document.blocks] == [("Aa",), ("Aa", "Bb"), ("Cc",)]
    assert document.title == "Title"


def test_html_headings_blocks_and_dropped_noise() -> None:
    html = b"""<!DOCTYPE html><html><head><title>Caching Guide</title>
    <style>p { color: red }</style><script>alert("x")</script></head><body>
    <nav><a href="/">Home</a></nav>
    <h1>Caching</h1><p>A cache keeps <b>recent</b> answers.</p>
    <!-- a comment that is not text -->
    <h2>Eviction</h2><ul><li>Least recently used goes first.</li></ul>
    <pre>cache.evict(key)
cache.clear()</pre>
    <table><tr><th>Size</th><th>Hits</th></tr></table>
    <img src="http://example.invalid/track.png"><iframe src="http://example.invalid/"></iframe>
    </body></html>"""
    document = parse_bytes(html, "guide.html")
    assert document.title == "Caching Guide"
    texts = [b.text for b in document.blocks]
    assert "A cache keeps recent answers." in texts
    assert "Least recently used goes first." in texts
    assert "Size | Hits" in texts
    code = next(b for b in document.blocks if b.code)
    assert code.text == "cache.evict(key)\ncache.clear()" and code.path == ("Eviction",)
    joined = " ".join(texts)
    for noise in ("alert", "color", "comment", "Home"):
        assert noise not in joined


def test_a_title_outside_head_is_the_title_not_a_paragraph() -> None:
    """``html.parser`` makes no ``<head>`` for a page without one: the ``<title>`` is still the
    document's title only, not also text of the page."""
    document = parse_bytes(b"<title>Sets</title><h1>Sets</h1><p>A set has no order.</p>", "s.htm")
    assert document.title == "Sets"
    assert [b.text for b in document.blocks] == ["A set has no order."]


def test_html_entities_are_text_and_nothing_is_fetched() -> None:
    html = b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><p>Fish &amp; chips &e;</p>'
    texts = [block.text for block in parse_bytes(html, "e.html").blocks]
    assert any(text.startswith("Fish & chips") for text in texts)
    assert not any("root:" in text for text in texts)


@pytest.mark.process
def test_pdf_text_layer_keeps_page_numbers(tmp_path: Path) -> None:
    pdf = make_pdf(
        tmp_path / "manual.pdf",
        [["The boiler starts with the red switch."], LONG_PAGE, ["Call support on 555."]],
        title="Boiler Manual",
    )
    document = parse_file(pdf)
    assert (document.kind, document.title) == ("pdf", "Boiler Manual")
    assert [b.page for b in document.blocks] == [1, 2, 3]
    chunks = chunk_document(document, "manual.pdf", max_tokens=64)
    assert chunks[0].page == 1 and "red switch" in chunks[0].text
    page_two = [c for c in chunks if c.page == 2]
    assert len(page_two) > 1  # a long page makes several chunks, each still on page 2
    assert all("filler" in c.text for c in page_two)
    assert chunks[-1].page == 3 and "555" in chunks[-1].text
    assert {c.kind for c in chunks} == {"pdf"}


@pytest.mark.usefixtures("no_tesseract")
def test_scanned_pdf_and_images_need_ocr(tmp_path: Path) -> None:
    """Without Tesseract (tests/retrieval/formats/test_ocr.py reads them with it)."""
    with pytest.raises(NoTextLayer, match=r"no text layer: needs OCR .*tesseract-ocr"):
        parse_file(make_scanned_pdf(tmp_path / "scan.pdf"))
    Image.new("L", (64, 32), 255).save(tmp_path / "photo.png")
    with pytest.raises(NoTextLayer, match=r"needs OCR .*tesseract-ocr is not installed"):
        parse_file(tmp_path / "photo.png")
    (tmp_path / "fake.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    with pytest.raises(UnreadableDocument, match="cannot parse as png: not a PNG, JPEG"):
        parse_file(tmp_path / "fake.png")


@pytest.mark.parametrize("name", ["broken.pdf", "broken.docx", "broken.xlsx"])
def test_corrupt_binary_files_are_refused_with_a_reason(tmp_path: Path, name: str) -> None:
    with pytest.raises(UnreadableDocument, match=f"cannot parse as {name.split('.')[1]}: .+"):
        parse_file(make_broken(tmp_path / name))


def test_docx_headings_become_section_paths(tmp_path: Path) -> None:
    document = parse_file(make_docx(tmp_path / "policy.docx"))
    assert (document.kind, document.title) == ("docx", "Travel Policy")
    by_text = {b.text: b.path for b in document.blocks}
    assert by_text["Who may travel, and how the costs are paid back."] == ("Travel Policy",)
    assert by_text["Book trains at least two weeks ahead."] == ("Booking",)
    assert by_text["A hotel night costs at most 150 euros in Paris."] == ("Booking", "Hotels")
    assert by_text["Item: Taxi receipts; Deadline: 30 days"] == ("Refunds",)
    (chunk,) = chunk_document(document, "policy.docx")  # short sections fill one chunk
    assert chunk.section == "Travel Policy | Booking | Booking > Hotels | Refunds"
    assert "\n\nHotels\nA hotel night costs at most 150 euros in Paris." in chunk.text


def _with_external_entity(package: Path, member: str, before: str, secret: Path) -> Path:
    """``package`` with ``member``'s XML declaring an entity that reads ``secret``."""
    with zipfile.ZipFile(package) as source:
        files = {name: source.read(name) for name in source.namelist()}
    xml = files[member].decode()
    declaration, rest = xml.split("?>", 1) if "?>" in xml else ("", xml)
    root = rest.lstrip().split()[0].lstrip("<")
    doctype = f'<!DOCTYPE {root} [<!ENTITY xxe SYSTEM "{secret.as_uri()}">]>'
    head = declaration + "?>" if declaration else ""
    files[member] = (head + doctype + rest.replace(before, "&xxe; " + before, 1)).encode()
    attacked = package.with_name("attacked-" + package.name)
    with zipfile.ZipFile(attacked, "w") as target:
        for name, data in files.items():
            target.writestr(name, data)
    return attacked


@pytest.mark.parametrize(
    ("maker", "member", "before"),
    [
        (make_docx, "word/document.xml", "Book trains"),
        (make_xlsx, "xl/worksheets/sheet1.xml", "Ada Lovelace"),
    ],
)
def test_office_files_expand_no_external_entity(
    tmp_path: Path, maker: object, member: str, before: str
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    suffix = ".docx" if maker is make_docx else ".xlsx"
    assert callable(maker)
    package = _with_external_entity(maker(tmp_path / f"f{suffix}"), member, before, secret)
    try:
        texts = _texts(package)
    except UnreadableDocument:
        return  # refusing the file is safe too
    assert texts and not any("TOPSECRET" in text for text in texts)


def test_eml_headers_body_and_attachments(tmp_path: Path) -> None:
    document = parse_file(make_eml(tmp_path / "mail.eml"))
    assert (document.kind, document.title) == ("eml", "Quarterly report is late")
    header = document.blocks[0].text
    assert "From: Ada <ada@example.org>" in header
    assert "Date: Tue, 01 Dec 2026 09:30:00 +0000" in header
    texts = [b.text for b in document.blocks]
    assert "The quarterly report will arrive on Friday." in texts
    # The body is its author's section; no attachment is read into the message.
    assert {b.path for b in document.blocks} == {(), ("From Ada",)}
    assert not any("PNG" in text for text in texts)
    # Attachments of a type ingest reads are files of their own (test_email_attachments.py).
    _, attachments = parse_with_attachments((tmp_path / "mail.eml").read_bytes(), "mail.eml")
    assert [a.name for a in attachments] == ["figures.rst", "chart.png"]
    assert attachments[0].data.startswith(b"Figures\n=======")


def test_eml_html_body_is_made_text(tmp_path: Path) -> None:
    texts = _texts(make_eml(tmp_path / "mail.eml", html=True))
    assert any(t.startswith("The quarterly report will arrive on Friday.") for t in texts)
    assert not any("<p>" in t for t in texts)


def test_eml_without_body_has_no_text() -> None:
    document = parse_bytes(b"Subject: only headers\n", "h.eml")
    assert document.blocks == []


def test_xlsx_rows_carry_their_headers_per_sheet(tmp_path: Path) -> None:
    document = parse_file(make_xlsx(tmp_path / "staff.xlsx"))
    assert [(b.path, b.text) for b in document.blocks] == [
        (("Staff",), "Name: Ada Lovelace; Role: Analyst; Office: London"),
        (("Staff",), "Name: Grace Hopper; Office: Arlington"),
        (("Rooms",), "Room: Babbage; Seats: 12"),
    ]
    (chunk,) = chunk_document(document, "staff.xlsx")
    assert (chunk.section, chunk.kind) == ("Staff | Rooms", "xlsx")
    assert chunk.text.endswith("Arlington\n\nRooms\nRoom: Babbage; Seats: 12")


def test_csv_rows_carry_their_headers_in_any_dialect() -> None:
    text = "\ufeffcity;country;\n\nParis;France;x\nLyon;;\n".encode()
    document = parse_bytes(text, "cities.csv")
    assert [b.text for b in document.blocks] == [
        "city: Paris; country: France; C: x",
        "city: Lyon",
    ]
    assert document.kind == "csv"


def test_csv_that_is_not_utf8_is_refused() -> None:
    with pytest.raises(UnreadableDocument, match="not valid UTF-8"):
        parse_bytes(b"a,b\n\xff,\xfe\n", "x.csv")
