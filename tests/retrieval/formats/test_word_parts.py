"""A DOCX's headers, footers, footnotes, text boxes and comments are indexed (issue 23 §3), as
well as its body: a file built with python-docx (footnotes and the text box added as Word
writes them) is parsed and ingested, and each of those texts found by search."""

from __future__ import annotations

from pathlib import Path

import docx
import pytest

from retrieval import DocumentStore, LimitExceeded, ParseLimits, ingest_path
from retrieval.formats import parse_bytes, parse_file
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.carried_documents import (
    COMMENT_AUTHOR,
    COMMENT_TEXT,
    FOOTER_TEXT,
    FOOTNOTE_TEXT,
    HEADER_TEXT,
    TEXT_BOX_TEXT,
    add_footnotes,
    footnotes_xml,
    make_word_parts,
)


def test_every_part_of_the_document_is_read_once(tmp_path: Path) -> None:
    document = parse_file(make_word_parts(tmp_path / "harbour.docx"))
    blocks = [(b.path, b.text) for b in document.blocks]
    assert document.title == "Harbour report"
    assert blocks == [
        (("Harbour report",), "The harbour was dredged in May."),
        (("Harbour report",), TEXT_BOX_TEXT),  # after its anchor; its VML fallback left out
        (("Header",), HEADER_TEXT),
        (("Footer",), FOOTER_TEXT),
        (("Footnotes",), FOOTNOTE_TEXT),  # Word's separator notes left out
        (("Comments",), f"{COMMENT_AUTHOR}: {COMMENT_TEXT}"),
    ]


def test_a_header_linked_to_the_previous_section_is_read_once(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_paragraph("First section.")
    document.sections[0].header.paragraphs[0].text = HEADER_TEXT
    document.add_section()
    document.add_paragraph("Second section, the same header.")
    second = document.add_section()
    second.header.is_linked_to_previous = False
    second.header.paragraphs[0].text = "A header of its own"
    document.save(str(tmp_path / "sections.docx"))
    texts = [b.text for b in parse_file(tmp_path / "sections.docx").blocks if b.path == ("Header",)]
    assert texts == [HEADER_TEXT, "A header of its own"]


@pytest.mark.parametrize(
    "text", [HEADER_TEXT, FOOTER_TEXT, FOOTNOTE_TEXT, TEXT_BOX_TEXT, COMMENT_TEXT]
)
def test_each_part_is_found_by_search(tmp_path: Path, store: DocumentStore, text: str) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    make_word_parts(folder / "harbour.docx")
    (folder / "other.md").write_text("# Other\n\nAn unrelated note on the weather in June.\n")
    ingest_path(folder, collection="docs", embedder=HashEmbedder(), store=store)
    embedder = HashEmbedder()
    [hit] = store.search("docs", embedder.embed([text])[0], 1)
    assert hit.source == "harbour.docx" and text in hit.text


def test_the_paragraphs_of_the_notes_count_against_the_limit(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_paragraph("A short body.")
    add_footnotes(document, footnotes_xml(*(f"Note {n}." for n in range(60))))
    document.save(str(tmp_path / "notes.docx"))
    data = (tmp_path / "notes.docx").read_bytes()
    assert len(parse_bytes(data, "notes.docx").blocks) == 61
    with pytest.raises(LimitExceeded, match="max_paragraphs"):
        parse_bytes(data, "notes.docx", ParseLimits(max_paragraphs=50))
