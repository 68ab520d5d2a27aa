"""Cut a document into retrieval-sized chunks that remember their title and section.

A document is split at its headings (reStructuredText or Markdown), each section into
paragraphs and code blocks, and those are packed, in order, into chunks of at most
``max_words`` words. A block longer than that is cut at sentence boundaries (code at line
boundaries), and at word boundaries as a last resort. Words are counted with each punctuation
mark as one, as WordPiece tokenizers do, so that code-heavy chunks stay small too: 160 such
words make about 175 MiniLM tokens, well under its 256-token window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from retrieval._markup import iter_blocks, split_sections, strip_noise

_TOKENISH = re.compile(r"\w+|[^\w\s]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[^\sa-z])")
#: The documents ingest reads; a title drops the suffix (".rst.txt" counts via ".txt").
SUPPORTED_SUFFIXES = (".txt", ".rst", ".md", ".markdown")


@dataclass(frozen=True)
class Chunk:
    """One retrievable piece of a document."""

    source: str  # path relative to the ingest root, POSIX separators
    title: str  # document title: its first heading, else the file stem
    section: str  # nearest heading above the chunk ("" if none)
    ordinal: int  # position within its source, 0-based
    text: str
    page: int | None = None  # 1-based page of a paged format (PDF), else None
    kind: str = ""  # the file type it came from: "md", "rst", "txt", "pdf", "html", ...


def _words(text: str) -> int:
    """Size in words, each punctuation mark counted as one: close to the WordPiece count."""
    return len(_TOKENISH.findall(text))


def _stem(source: str) -> str:
    """``controlflow`` for ``tutorial/controlflow.rst.txt``."""
    name = PurePosixPath(source).name
    while True:
        suffix = next((s for s in SUPPORTED_SUFFIXES if name.lower().endswith(s)), "")
        if not suffix or len(name) == len(suffix):
            return name
        name = name[: -len(suffix)]


def _pack(pieces: list[str], budget: int, joiner: str) -> list[str]:
    """Greedily join consecutive pieces while the total stays within ``budget`` words."""
    packed: list[str] = []
    current: list[str] = []
    size = 0
    for piece in pieces:
        n = _words(piece)
        if current and size + n > budget:
            packed.append(joiner.join(current))
            current, size = [], 0
        current.append(piece)
        size += n
    if current:
        packed.append(joiner.join(current))
    return packed


def _split(text: str, budget: int, *, code: bool) -> list[str]:
    """``text`` as pieces of at most ``budget`` words: sentences, then lines, then words."""
    if _words(text) <= budget:
        return [text]
    if not code:
        sentences = _SENTENCE_END.split(text)
        if len(sentences) > 1:
            parts = [p for s in sentences for p in _split(s, budget, code=code)]
            return _pack(parts, budget, " ")
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) > 1:
        return _pack([p for line in lines for p in _split(line, budget, code=code)], budget, "\n")
    return _pack(text.split(), budget, " ")


def chunk_text(
    text: str, source: str, *, max_words: int = 160, overlap_words: int = 0
) -> list[Chunk]:
    """Chunks of ``text`` (read from ``source``), in document order; [] if it holds no text.

    With ``overlap_words``, each chunk after the first of a section starts with the last
    ``overlap_words`` words of the one before; chunks still hold at most ``max_words`` words.
    """
    if max_words < 1:
        raise ValueError(f"max_words must be at least 1, got {max_words}")
    if not 0 <= overlap_words < max_words:
        raise ValueError(f"overlap_words must be in [0, max_words), got {overlap_words}")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").expandtabs(8).split("\n")
    sections = split_sections(strip_noise(lines))
    title = next((s.heading for s in sections if s.heading), "") or _stem(source)
    budget = max_words - overlap_words
    chunks: list[Chunk] = []
    for section in sections:
        pieces = [
            piece
            for block in iter_blocks(section.lines)
            for piece in _split(block.text, budget, code=block.code)
        ]
        previous = ""
        for body in _pack(pieces, budget, "\n\n"):
            tail = " ".join(previous.split()[-overlap_words:]) if overlap_words and previous else ""
            chunk_body = f"{tail} {body}" if tail else body
            chunks.append(Chunk(source, title, section.heading, len(chunks), chunk_body))
            previous = body
    return chunks
