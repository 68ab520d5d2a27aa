"""Cut a parsed document into retrieval-sized chunks that remember title, section path and page.

A document (``retrieval.formats``) is a list of blocks (paragraphs, code blocks, table rows)
under their headings. Blocks are cut into sentences (code into lines) of at most
``PIECE_TOKENS`` tokens, and the pieces of a page are packed, in order, into chunks of at most
``max_tokens`` tokens of the embedding model, counting the heading line that ``embedding_input``
puts above the text, so what is embedded fits the model's window (MiniLM: 256). Chunks fill up
across sections: a chunk that reaches into the next section holds that heading as a line of
its text, and is named by the section it starts in; pages are never mixed, nor text read by
OCR with a text layer's (a chunk's ``ocr`` says which it holds). With
``overlap_tokens``, each chunk after the first of a page starts with the last words of the one
before. On the Python FAQ evaluation (whole corpus) this took nDCG@10 from 0.667, with a chunk
per section at most, to 0.720 (docs/studies/retrieval.md, retrieval evaluation).

Token counts come from a ``TokenCounter`` (``retrieval.ingest.tokens``): ingest uses the embedding
model's own WordPiece tokenizer; ``approximate_tokens``, the default here, needs no file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import groupby

from retrieval.formats import PATH_SEPARATOR, Document, parse_markup, stem_of, suffix_of
from retrieval.formats.document import SECTIONS_SEPARATOR, Block, first_section
from retrieval.ingest.tokens import TokenCounter, approximate_tokens

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^\sa-z])")

#: Chunk size in tokens of the embedding model, heading line included, and the overlap between
#: consecutive chunks of a section (docs/studies/ingest-and-formats.md, "Ingest: chunk size and
#: speed"): 256 (all of MiniLM's window) ranked best of 128/192/256 on the demo corpus's FAQ
#: questions, nDCG@10 0.771 against 0.610 for plain 200-word windows; overlap 0 and 32 tied, 64
#: lost.
DEFAULT_CHUNK_TOKENS = 256
DEFAULT_OVERLAP_TOKENS = 32
#: Blocks are cut into sentences (lines of code) of at most this many tokens before they are
#: packed, so that a chunk fills up instead of closing before a paragraph that does not fit.
#: On the Python FAQ evaluation (whole corpus, same vectors): 24 gave nDCG@10 0.720, 48 0.714,
#: whole paragraphs 0.709.
PIECE_TOKENS = 24


@dataclass(frozen=True)
class Chunk:
    """One retrievable piece of a document."""

    source: str  # path relative to the ingest root, POSIX separators
    title: str  # document title: its own, else its first heading, else the file stem
    section: str  # section path below the title, "Outer > Inner" ("" if none); a chunk that
    # spans sections lists each it holds text of, in order, "Outer > Inner | Outer > Next"
    ordinal: int  # position within its source, 0-based
    text: str
    page: int | None = None  # 1-based page of a paged format (PDF), else None
    kind: str = ""  # the file type it came from: "md", "rst", "txt", "pdf", "html", ...
    ocr: bool = False  # its text was read by OCR (a scanned page, an image)


def heading_line(title: str, section: str) -> str:
    """The line embedded above a chunk's text: its title, and its section path if other."""
    if not title:
        return section
    return title if section in ("", title) else f"{title}: {section}"


#: A file name that is a word and a counter (``answer-001``, ``IMG_2041``, ``scan0003``,
#: ``2024``): it tells a file from its neighbours, not what it holds.
_COUNTER_NAME = re.compile(r"[A-Za-z]*[-_ .]?\d+")
_NAME_SEPARATORS = re.compile(r"[-_.\s]+")


def embedded_title(title: str, source: str) -> str:
    """The title as embedded: the document's own; for a document with none (shown under its
    file name), the name's words (``services-agreement`` -> ``services agreement``,
    ``Q3_board_minutes`` -> ``Q3 board minutes``), the context a reader of the file has;
    ``""`` for a name that is a word and a counter (``answer-001``, ``IMG_2041``).

    Counters are left out as they were measured: on the Python FAQ evaluation, whose answers
    are files ``answer-NNN`` with no heading, embedding those stems put the answers below pages
    whose real headings matched the question (nDCG@10 0.788 with the stem, 0.801 without, on
    its 25% sample; docs/studies/retrieval.md, retrieval evaluation)."""
    stem = stem_of(source)
    if title != stem:
        return title
    if _COUNTER_NAME.fullmatch(stem):
        return ""
    return " ".join(_NAME_SEPARATORS.split(stem)).strip()


def embedding_input(chunk: Chunk) -> str:
    """What is embedded for a chunk: its text under its title (if the document has one) and
    the path of the section it starts in (later sections' headings are lines of its text)."""
    line = heading_line(embedded_title(chunk.title, chunk.source), first_section(chunk.section))
    return f"{line}\n{chunk.text}" if line else chunk.text


def _pack(pieces: list[str], budget: int, joiner: str, count: TokenCounter) -> list[str]:
    """Greedily join consecutive pieces while the total stays within ``budget`` tokens."""
    packed: list[str] = []
    current: list[str] = []
    size = 0
    for piece in pieces:
        n = count(piece)
        if current and size + n > budget:
            packed.append(joiner.join(current))
            current, size = [], 0
        current.append(piece)
        size += n
    if current:
        packed.append(joiner.join(current))
    return packed


def _split(text: str, budget: int, *, code: bool, count: TokenCounter) -> list[str]:
    """``text`` as pieces of at most ``budget`` tokens: sentences, then lines, then words."""
    if count(text) <= budget:
        return [text]
    if not code:
        sentences = _SENTENCE_END.split(text)
        if len(sentences) > 1:
            parts = [p for s in sentences for p in _split(s, budget, code=code, count=count)]
            return _pack(parts, budget, " ", count)
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) > 1:
        parts = [p for line in lines for p in _split(line, budget, code=code, count=count)]
        return _pack(parts, budget, "\n", count)
    return _pack(text.split(), budget, " ", count)


def _tail(text: str, overlap: int, count: TokenCounter) -> str:
    """The last words of ``text`` that make at most ``overlap`` tokens."""
    words: list[str] = []
    size = 0
    for word in reversed(text.split()):
        size += count(word)
        if size > overlap:
            break
        words.append(word)
    return " ".join(reversed(words))


@dataclass(frozen=True)
class _Piece:
    """A sentence (a line of code), a heading met inside a chunk, or a block's first piece."""

    text: str
    sep: str  # put before it when it is not the first of its chunk
    heading: bool = False


def _pieces(blocks: list[Block], size: int, count: TokenCounter) -> list[tuple[str, _Piece]]:
    """Each block cut into pieces of at most ``size`` tokens, in order, with the section path
    they lie under; where the section changes, its heading comes first as a piece of its own."""
    out: list[tuple[str, _Piece]] = []
    before: tuple[str, ...] | None = None
    for block in blocks:
        section = PATH_SEPARATOR.join(block.path)
        first_sep = "\n\n"
        if block.path != before and before is not None and block.path:
            out.append((section, _Piece(block.path[-1], "\n\n", heading=True)))
            first_sep = "\n"
        before = block.path
        parts = _split(block.text, size, code=block.code, count=count)
        for n, part in enumerate(parts):
            out.append(
                (section, _Piece(part, first_sep if n == 0 else ("\n" if block.code else " ")))
            )
    return out


def chunk_document(
    document: Document,
    source: str,
    *,
    max_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap_tokens: int = 0,
    count: TokenCounter = approximate_tokens,
) -> list[Chunk]:
    """Chunks of ``document`` (read from ``source``), in document order; [] if it holds none.

    Chunks fill up to ``max_tokens`` across sections: a short section does not make a short
    chunk of its own; a chunk that reaches into the next section holds its heading as a line
    of text, and is named by every section it holds text of, the one it starts in first
    (``SECTIONS_SEPARATOR``). Pages are never mixed."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    if not 0 <= overlap_tokens < max_tokens:
        raise ValueError(f"overlap_tokens must be in [0, max_tokens), got {overlap_tokens}")
    title = document.title or stem_of(source)
    shown = embedded_title(title, source)
    least = max((max_tokens - overlap_tokens) // 2, 1)  # the smallest budget a chunk gets
    chunks: list[Chunk] = []
    for (page, ocr), group in groupby(document.blocks, key=lambda b: (b.page, b.ocr)):
        pieces = _pieces(list(group), min(PIECE_TOKENS, least), count)
        packed = _pack_sections(pieces, shown, max_tokens - overlap_tokens, least, count)
        previous = ""
        for section, text in packed:
            tail = _tail(previous, overlap_tokens, count) if overlap_tokens and previous else ""
            body = f"{tail} {text}" if tail else text
            chunks.append(
                Chunk(source, title, section, len(chunks), body, page, document.kind, ocr)
            )
            previous = text
    return chunks


def _pack_sections(
    pieces: list[tuple[str, _Piece]], shown: str, room: int, least: int, count: TokenCounter
) -> list[tuple[str, str]]:
    """``(sections, text)`` of each chunk packed from one page's pieces: ``room`` tokens less
    the chunk's heading line (at least ``least``), the sections being those it holds text of
    (a heading alone at its end does not count), the one it starts in first."""
    packed: list[tuple[str, str]] = []
    body: list[str] = []
    sections: list[str] = []
    size, budget = 0, 0
    for path, piece in pieces:
        n = count(piece.text)
        if body and size + n > budget:
            packed.append((SECTIONS_SEPARATOR.join(sections), "".join(body)))
            body, sections, size = [], [], 0
        if not body:
            sections = [path]
            if piece.heading:  # the chunk starts at this heading: it is on the heading line
                continue
            line = heading_line(shown, path)
            budget = max(room - (count(line) if line else 0), least)
        elif not piece.heading and path not in sections:
            sections.append(path)
        body.append(piece.text if not body else piece.sep + piece.text)
        size += n
    if body:
        packed.append((SECTIONS_SEPARATOR.join(sections), "".join(body)))
    return packed


def chunk_text(
    text: str,
    source: str,
    *,
    max_tokens: int = DEFAULT_CHUNK_TOKENS,
    overlap_tokens: int = 0,
    count: TokenCounter = approximate_tokens,
) -> list[Chunk]:
    """Chunks of markup ``text`` read from ``source``: Markdown for ``.md``, else reST/text."""
    suffix = suffix_of(source) or ".txt"
    kind = {".md": "md", ".markdown": "md", ".rst": "rst", ".rst.txt": "rst"}.get(suffix, "txt")
    return chunk_document(
        parse_markup(text, kind),
        source,
        max_tokens=max_tokens,
        overlap_tokens=overlap_tokens,
        count=count,
    )


__all__ = [
    "DEFAULT_CHUNK_TOKENS",
    "DEFAULT_OVERLAP_TOKENS",
    "Block",
    "Chunk",
    "chunk_document",
    "chunk_text",
    "embedded_title",
    "embedding_input",
    "heading_line",
]
