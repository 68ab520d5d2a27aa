"""Chunking: reST and Markdown headings, directive noise, roles, sizes."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from retrieval import Chunk, chunk_text
from retrieval.formats import PATH_SEPARATOR, parse_file, parse_markup
from retrieval.formats.document import SECTIONS_SEPARATOR, Block, Document, first_section
from retrieval.ingest.chunking import chunk_document, embedding_input
from retrieval.ingest.tokens import approximate_tokens, wordpiece_counter
from tests.helpers.documents import make_xlsx

CONTROLFLOW = "tutorial/controlflow.rst.txt"


def _words(chunks: list[Chunk]) -> list[str]:
    return [word for chunk in chunks for word in chunk.text.split()]


def test_rest_document_titles_sections_and_order(demo_corpus: Path) -> None:
    text = (demo_corpus / CONTROLFLOW).read_text()
    chunks = chunk_text(text, CONTROLFLOW)
    assert chunks
    assert {c.title for c in chunks} == {"More Control Flow Tools"}
    assert {c.source for c in chunks} == {CONTROLFLOW}
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    sections = [PATH_SEPARATOR.join(b.path) for b in parse_markup(text, "rst").blocks]
    # A chunk is named by each section it holds text of, the one it starts in first.
    named = {s for c in chunks for s in c.section.split(SECTIONS_SEPARATOR)}
    assert named <= set(sections) and {first_section(c.section) for c in chunks} < named
    # Overlined title first, then underlined ones, with roles in titles made plain.
    assert sections[0] == first_section(chunks[0].section) == "More Control Flow Tools"
    # A section is named by its path below the title: nested headings joined by " > ".
    default_values = "More on Defining Functions > Default Argument Values"
    for expected in ("if Statements", "The range Function", default_values):
        assert expected in sections
    assert sections.index("Defining Functions") < sections.index(default_values)
    assert (
        "More on Defining Functions > Special parameters > Positional-Only Parameters" in sections
    )
    assert {c.kind for c in chunks} == {"rst"}
    assert {c.page for c in chunks} == {None}


def test_rest_noise_is_dropped_and_code_kept(demo_corpus: Path) -> None:
    chunks = chunk_text((demo_corpus / CONTROLFLOW).read_text(), CONTROLFLOW)
    text = "\n".join(c.text for c in chunks)
    for noise in (
        ".. _tut-",
        ".. index::",
        "statement: for",
        ":keyword:",
        ":func:",
        "One suggestion",
    ):
        assert noise not in text
    assert not re.search(r"^\s*=+\s*$", text, re.MULTILINE)  # no heading underlines
    assert ">>> for w in words:" in text  # code examples answer questions
    assert "def ask_ok(prompt, retries=4, reminder='Please try again!'):" in text
    # A short section shares its chunk: its heading is a line of the text, above its own.
    assert "\n\nif Statements\nPerhaps the most well-known statement type is the if" in text


def test_directives_roles_and_links_become_plain_text() -> None:
    text = """\
.. _intro-label:

Intro
=====

.. index::
   single: statement; if
   pair: keyword; elif

.. highlight:: python

.. This comment is for editors
   and spans two lines.

Use :keyword:`!if`, call :func:`len`, read :ref:`the tutorial <tut-intro>`,
see :meth:`~str.format`, :pep:`8`, `the site <https://python.org>`_ and ``x + 1``.

.. note::
   Notes keep their text with :class:`dict`.

.. code-block:: python
   :linenos:

   print(len("abc"))
"""
    [chunk] = chunk_text(text, "intro.rst")
    assert chunk.title == chunk.section == "Intro"
    assert "Use if, call len, read the tutorial," in chunk.text
    assert "see format, PEP 8, the site and x + 1." in chunk.text
    assert "Notes keep their text with dict." in chunk.text
    assert 'print(len("abc"))' in chunk.text
    for noise in ("intro-label", "single:", "highlight", "editors", ":linenos:", "code-block", "`"):
        assert noise not in chunk.text


def test_literal_block_in_a_list_item_ends_with_the_item_text() -> None:
    text = """\
- Hash lists by their address.  This does not work, e.g.::

     mydict = {[1, 2]: '12'}

  would raise a :exc:`KeyError` exception.
"""
    [chunk] = chunk_text(text, "faq.rst")
    assert "mydict = {[1, 2]: '12'}" in chunk.text
    assert "would raise a KeyError exception." in chunk.text
    assert "e.g.:" in chunk.text and "e.g.::" not in chunk.text


def test_markdown_headings_and_fenced_code() -> None:
    text = """\
# Install Guide

Read this first.

## From PyPI

Run pip:

```sh
# this is a shell comment, not a heading
pip install ragtime
```

Setext Heading
--------------

Done.
"""
    document = parse_markup(text, "md")
    assert document.title == "Install Guide"
    by_section = {PATH_SEPARATOR.join(b.path): b.text for b in document.blocks}
    assert by_section["Install Guide"] == "Read this first."
    assert "# this is a shell comment, not a heading" in by_section["From PyPI"]
    assert by_section["Setext Heading"] == "Done."
    # Short sections fill one chunk, named by each, the others' headings inline.
    (chunk,) = chunk_text(text, "docs/install.md")
    assert chunk.title == "Install Guide"
    assert chunk.section == "Install Guide | From PyPI | Setext Heading"
    assert chunk.text.startswith("Read this first.\n\nFrom PyPI\nRun pip:\n\n```sh\n")
    assert chunk.text.endswith("```\n\nSetext Heading\nDone.")


def test_plain_text_takes_the_file_stem_as_title() -> None:
    chunks = chunk_text("Just a note.\n\nAnother paragraph.\n", "notes/todo.rst.txt")
    assert [(c.title, c.section, c.text) for c in chunks] == [
        ("todo", "", "Just a note.\n\nAnother paragraph.")
    ]


def test_crlf_line_endings() -> None:
    chunks = chunk_text("Title\r\n=====\r\n\r\nBody text.\r\n", "x.rst")
    assert [(c.title, c.section, c.text) for c in chunks] == [("Title", "Title", "Body text.")]


@pytest.mark.parametrize("text", ["", "   \n\n\t\n", ".. _only-a-label:\n\n.. index:: x\n"])
def test_no_text_gives_no_chunks(text: str) -> None:
    assert chunk_text(text, "empty.rst") == []


def test_long_paragraph_splits_at_sentence_boundaries() -> None:
    sentences = [f"Sentence number {i} has exactly eight words here." for i in range(30)]
    paragraph = " ".join(sentences)
    chunks = chunk_text(paragraph, "long.txt", max_tokens=40)
    assert len(chunks) > 1
    assert all(len(c.text.split()) <= 40 for c in chunks)
    assert all(c.text.endswith("here.") for c in chunks)  # cut between sentences
    assert _words(chunks) == paragraph.split()  # nothing lost, nothing repeated


def test_a_sentence_longer_than_max_tokens_is_cut_at_words() -> None:
    text = " ".join(f"word{i}" for i in range(95))
    chunks = chunk_text(text, "run-on.txt", max_tokens=20)
    assert all(len(c.text.split()) <= 20 for c in chunks)
    assert _words(chunks) == text.split()


def test_paragraphs_are_packed_up_to_max_tokens() -> None:
    paragraphs = [f"Paragraph {i} is short." for i in range(12)]
    chunks = chunk_text("\n\n".join(paragraphs), "short.txt", max_tokens=20)
    assert 1 < len(chunks) < 12
    assert all(len(c.text.split()) <= 20 for c in chunks)
    assert _words(chunks) == " ".join(paragraphs).split()


@pytest.mark.parametrize("max_tokens", [50, 160])
def test_max_tokens_honoured_on_the_demo_corpus(demo_corpus: Path, max_tokens: int) -> None:
    for path in sorted(demo_corpus.rglob("*.rst.txt")):
        source = path.relative_to(demo_corpus).as_posix()
        for chunk in chunk_text(path.read_text(), source, max_tokens=max_tokens):
            assert 0 < len(chunk.text.split()) <= max_tokens, (source, chunk.ordinal)


def test_overlap_repeats_the_tail_of_the_previous_chunk() -> None:
    paragraph = " ".join(f"Sentence {i} is here." for i in range(40))
    chunks = chunk_text(paragraph, "o.txt", max_tokens=30, overlap_tokens=6)
    assert len(chunks) > 2
    for before, after in itertools.pairwise(chunks):
        # "Sentence 3 is here." is 5 tokens (the full stop is one): the tail is the last
        # sentence of the chunk before, which fits in 6 tokens where two would not.
        assert after.text.startswith(" ".join(before.text.split()[-4:]) + " ")
        assert approximate_tokens(f"o\n{after.text}") <= 30
    # Without overlap, the same text in the same chunk boundaries, nothing repeated.
    plain = chunk_text(paragraph, "o.txt", max_tokens=30)
    assert _words(plain) == paragraph.split()


def test_chunks_fill_up_across_sections_but_never_across_pages() -> None:
    """Paragraphs are cut at sentences to fill a chunk; a chunk that starts at a heading has
    it on its heading line only; a chunk that starts inside a section is named by it, and by
    the next one it reaches into; a new page starts a new chunk."""
    sentence = "This sentence has exactly eight words in it."
    blocks = [
        Block(" ".join([sentence] * 3), ("Alpha",), page=1),
        Block(" ".join([sentence] * 6), ("Beta",), page=1),
        Block("Short.", ("Gamma",), page=2),
    ]
    chunks = chunk_document(Document("pdf", "Guide", blocks), "g.pdf", max_tokens=60)
    assert [(c.section, c.page) for c in chunks] == [
        ("Alpha | Beta", 1),
        ("Beta", 1),
        ("Gamma", 2),
    ]
    first, second, third = chunks
    # Alpha's 3 sentences, Beta's heading inline, then as many of Beta's sentences as fit.
    assert first.text.startswith(f"{sentence} {sentence} {sentence}\n\nBeta\n{sentence}")
    assert approximate_tokens(embedding_input(first)) > 45  # filled, not closed at Beta
    assert not second.text.startswith("Beta")  # starts inside Beta: named by it
    assert second.text.startswith(sentence)
    assert third.text == "Short."  # a new page, though the chunk before had room
    for chunk in chunks:
        assert approximate_tokens(embedding_input(chunk)) <= 60


def test_chunk_sizes_count_the_heading_line_embedded_above() -> None:
    text = "Title\n=====\n\nA Rather Long Section Heading Here\n---\n\n" + " ".join(
        f"word{i}" for i in range(200)
    )
    for chunk in chunk_text(text, "h.rst", max_tokens=40):
        assert approximate_tokens(embedding_input(chunk)) <= 40


def test_a_file_name_is_embedded_as_context_unless_it_is_a_counter() -> None:
    """A heading-less file is titled by its stem for people. The stem's words are embedded
    above each chunk (a clause of ``services-agreement`` says which document it is in), within
    the chunk's budget; a name that is a word and a counter (``answer-017``) is not: it tells
    files apart, not what they hold. A real title and sections are embedded as before."""
    (bare,) = chunk_text("Default values make arguments optional.", "faq/answer-017.rst")
    assert bare.title == "answer-017"
    assert embedding_input(bare) == "Default values make arguments optional."
    (clause,) = chunk_text("The supplier delivers within 30 days.", "services-agreement.txt")
    assert clause.title == "services-agreement"
    assert clause.text == "The supplier delivers within 30 days."  # shown and cited as is
    assert embedding_input(clause) == "services agreement\nThe supplier delivers within 30 days."
    titled = chunk_text("Defaults\n========\n\nThey make arguments optional.", "answer-017.rst")
    assert embedding_input(titled[0]) == "Defaults\nThey make arguments optional."
    words = " ".join(f"w{i}" for i in range(100))
    chunks = chunk_text(words, "a-long-file-name-that-says-what-it-holds.txt", max_tokens=40)
    assert all(embedding_input(c).startswith("a long file name") for c in chunks)
    assert max(approximate_tokens(embedding_input(c)) for c in chunks) <= 40


def test_a_table_row_is_embedded_with_its_file_sheet_and_columns(tmp_path: Path) -> None:
    """Issue 46 §1's other case: a row of a spreadsheet says which workbook (its name, where it
    has no title), which sheet and which columns it belongs to."""
    workbook = make_xlsx(tmp_path / "office-directory.xlsx")
    chunks = chunk_document(parse_file(workbook), "office-directory.xlsx", max_tokens=16)
    grace = next(c for c in chunks if "Grace Hopper" in c.text)
    assert embedding_input(grace).startswith("office directory: Staff\n")
    assert "Name: Grace Hopper; Office: Arlington" in grace.text
    rows = (tmp_path / "supplier-prices.csv").write_text("Item,Price\nBolts,4\nNuts,2\n")
    assert rows
    (csv_chunk,) = chunk_document(
        parse_file(tmp_path / "supplier-prices.csv"), "supplier-prices.csv"
    )
    assert embedding_input(csv_chunk) == f"supplier prices\n{csv_chunk.text}"


def test_word_piece_counts_are_the_model_tokenizer() -> None:
    count = wordpiece_counter()
    assert count("hello world") == 2
    assert count("tokenization") == 2  # token ##ization
    assert count("") == 0
    long_text = "word " * 1000  # no truncation at the tokenizer's stored 128
    assert count(long_text) == 1000


def test_word_piece_chunks_fit_the_model_window(demo_corpus: Path) -> None:
    count = wordpiece_counter()
    path = demo_corpus / CONTROLFLOW
    chunks = chunk_text(path.read_text(), CONTROLFLOW, max_tokens=128, count=count)
    assert len(chunks) > 10
    assert max(count(embedding_input(c)) for c in chunks) <= 128


@pytest.mark.parametrize(("max_tokens", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_bad_sizes_are_refused(max_tokens: int, overlap: int) -> None:
    with pytest.raises(ValueError):
        chunk_text("text", "x.txt", max_tokens=max_tokens, overlap_tokens=overlap)
