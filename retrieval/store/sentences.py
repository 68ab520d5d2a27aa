"""Sentences as attribution weighs them, and their vectors, stored with each chunk at ingest.

``sentences`` splits a text where a sentence ends (. ! ? followed by space, a colon before a code
block, a blank line, a new list item), collapses whitespace, drops ``[n]`` labels and pieces of
fewer than ``MIN_WORDS`` words. Attribution (``app.stages.citations``) gives each sentence of an
answer to the passage holding the sentence most like it; the passages' sentence vectors are computed
once, at ingest (``sentence_vectors``), and kept in the snapshot (``retrieval.store.snapshot``), so
that a question's attribution embeds only its answer.

``scored_pieces`` cuts a passage at the same places, keeping every character, and scores each
piece by its kept vector's similarity to the question: what context pruning
(``inference.prompt``) chooses sentences by.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

_LABEL_WITH_SPACE = re.compile(r"\s*\[\d{1,3}\]")
#: A sentence ends at . ! ? (and : before a code block) followed by space; a blank line or a new
#: list item also ends one.
_BREAK = re.compile(r"(?<=[.!?])\s+|::?\s*\n|\n\s*\n|\n(?=\s*(?:[-*\u2022]|\d{1,2}[.)])\s)")
_WORD = re.compile(r"\w+")
#: Fewer content words than this and a "sentence" says too little to attribute ("Yes.").
MIN_WORDS = 3


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` worth attributing, whitespace collapsed, labels removed."""
    out = []
    for piece in _BREAK.split(_LABEL_WITH_SPACE.sub("", text)):
        sentence = " ".join(piece.split())
        if len(_WORD.findall(sentence)) >= MIN_WORDS:
            out.append(sentence)
    return out


def sentence_vectors(
    embed: Callable[[Sequence[str]], np.ndarray], texts: Sequence[str]
) -> list[np.ndarray]:
    """Each text's sentence vectors (rows in ``sentences(text)`` order), from one call of
    ``embed`` (texts to unit row vectors) over all of them."""
    parts = [sentences(text) for text in texts]
    flat = [s for part in parts for s in part]
    matrix = np.asarray(embed(flat), dtype=np.float32) if flat else None
    out, start = [], 0
    for part in parts:
        if matrix is None:
            out.append(np.zeros((0, 0), np.float32))
            continue
        out.append(matrix[start : start + len(part)])
        start += len(part)
    return out


@dataclass(frozen=True)
class ScoredPiece:
    """A stretch of a passage's text from one sentence's start to the next's, as written."""

    text: str
    score: float | None
    """Cosine similarity of its sentence to the question; None for a piece ``sentences`` leaves
    out (too short to weigh), a question, or a passage without kept vectors."""
    asks: float | None = None
    """For a piece that is itself a question (an FAQ's heading), its similarity to the question:
    how close the question it asks is to the one asked. None for any other piece."""


def scored_pieces(
    text: str, rows: np.ndarray | None, query: np.ndarray | None
) -> list[ScoredPiece]:
    """``text`` cut where ``sentences`` cuts it, every character kept (labels aside), each piece
    scored by its row of ``rows`` (the kept vectors, in ``sentences(text)`` order) against the
    unit vector ``query``. Unscored when there are no rows, no query, or rows that do not match
    the text's sentences; and a piece that is itself a question (an FAQ's next heading, say),
    which is close to a question without answering it."""
    stripped = _LABEL_WITH_SPACE.sub("", text)
    bounds = [0, *(m.end() for m in _BREAK.finditer(stripped)), len(stripped)]
    spans = [(a, b) for a, b in pairwise(bounds) if b > a]
    counted = [len(_WORD.findall(stripped[a:b])) >= MIN_WORDS for a, b in spans]
    scores: np.ndarray | None = None
    if rows is not None and query is not None and len(rows) == sum(counted) and len(rows):
        scores = np.asarray(rows, dtype=np.float32) @ np.asarray(query, np.float32).reshape(-1)
    out, row = [], 0
    for (a, b), has_row in zip(spans, counted, strict=True):
        score = asked = None
        if has_row:
            similarity = float(scores[row]) if scores is not None else None
            if stripped[a:b].rstrip().endswith("?"):
                asked = similarity
            else:
                score = similarity
            row += 1
        out.append(ScoredPiece(stripped[a:b], score, asked))
    return out
