"""The extract stage: whether the prompt's passages can answer the question at all, and the
answer they give in their own words, with no model call.

Each prompt passage (the whole of it, not only what a prompt cut short to fit the model's
context holds) is cut into pieces where a sentence ends and each piece scored by its
sentence's similarity to the question (``retrieval.store.sentences.scored_pieces``: the sentence
vectors ingest kept, as context pruning scores them; a piece that is itself a question, such as
an FAQ's heading, is not scored). Then:

* **answerable**: the best piece's similarity reaches ``min_similarity``
  (``RAGTIME_ANSWERABLE_MIN_SIMILARITY``). Below it no passage is close enough to answer, and
  the request abstains ("The documents do not answer this.") without spending generation. The
  threshold was calibrated on the labelled sets' unanswerable and answerable questions
  (``ragtime eval answerable``; BENCHMARKS.md, "Answers a user can trust").
* **the extractive answer**: the best pieces (at most ``MAX_PIECES``, each within
  ``NEAR_BEST`` of the best, ``MAX_CHARS`` in all), each with the pieces it needs to be read
  (the example a colon introduces, the start of a sentence an abbreviation cut), put back in
  their passages' order, each passage's run of pieces followed by its ``[n]``. Every word is a
  passage's: nothing is made up, and every sentence says where it came from.

A passage whose sentence vectors were not kept (a snapshot built before ingest kept them) is not
scored; when no passage is, the question counts as answerable and the extractive answer is
each passage's opening, so that an old collection loses nothing it had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from app.stages.attribution import StoredRows, kept_rows, stored_chunk
from app.stages.grounding import terms
from app.stages.result import StageResult
from inference.prompt import PromptPassage
from retrieval.store.sentences import ScoredPiece, scored_pieces
from tracing.budget import Allowance, StageName

#: What an answer says when no passage is close enough to the question.
ABSTENTION = "The documents do not answer this."
#: The most pieces an extractive answer holds, and the most characters.
MAX_PIECES = 3
MAX_CHARS = 700
#: A piece joins the answer when its similarity is within this of the best piece's.
NEAR_BEST = 0.12
#: How much the question's own words in a piece weigh beside its similarity (``_ranked``).
WORDS_WEIGHT = 0.15
#: The longest piece a chosen one brings along to be read (``_neighbours``), in characters.
FOLLOWER_CHARS = 400


@dataclass(frozen=True)
class Evidence:
    """What the extract stage weighs: the question, its unit vector (None when nothing
    embedded it), and the passages the prompt holds, with their labels."""

    question: str
    vector: np.ndarray | None
    passages: Sequence[PromptPassage]


@dataclass(frozen=True)
class Extracted(StageResult):
    """The evidence's verdict: whether it can answer, how close its best sentence is, and its
    own answer (labelled sentences) with the labels it cites."""

    answerable: bool
    similarity: float | None
    """The best piece's similarity to the question; None when no passage could be scored."""
    text: str
    cited: tuple[int, ...] = field(default=())
    units: float = 0.0
    """What its cost is learned over: none (a few milliseconds whatever it weighs)."""
    degradation: tuple[str, str] | None = None
    """``("extracted", why)`` when ``auto`` answered with it after the model had begun."""

    def attributes(self) -> dict[str, str | int | float | bool]:
        attrs: dict[str, str | int | float | bool] = {
            "ragtime.extract.answerable": self.answerable,
            "ragtime.extract.cited": len(self.cited),
            "ragtime.extract.chars": len(self.text),
        }
        if self.similarity is not None:
            attrs["ragtime.extract.similarity"] = round(self.similarity, 4)
        return attrs


@dataclass(frozen=True)
class Fallback:
    """``auto`` turning to the evidence's answer once the model's fell short: the verdict
    weighed before generation, and why (said as the stage's degradation)."""

    extracted: Extracted
    reason: str


@dataclass(frozen=True)
class _Piece:
    label: int
    position: int
    text: str
    similarity: float
    score: float
    """What the pieces are ranked by: the similarity, and the question's words it holds."""


class ExtractAnswer:
    """Weighs the prompt's passages against the question: ``Extracted``."""

    name = StageName.EXTRACT
    component = "embedder"

    def __init__(self, *, min_similarity: float, stored_rows: StoredRows) -> None:
        if not -1.0 <= min_similarity <= 1.0:
            raise ValueError(f"min_similarity must lie in [-1, 1], got {min_similarity}")
        self.min_similarity = min_similarity
        self.stored_rows = stored_rows
        """A chunk's sentence vectors, as ingest kept them (``DocumentStore.sentence_rows``)."""

    async def run(self, inputs: Evidence | Fallback, allowance: Allowance) -> Extracted:
        """The verdict and the extractive answer (a few array products: on the loop); for a
        ``Fallback``, the answer weighed before, taken instead of the model's."""
        if isinstance(inputs, Fallback):
            return replace(inputs.extracted, degradation=("extracted", inputs.reason))
        return self.extract(inputs)

    def extract(self, evidence: Evidence) -> Extracted:
        pieces = {p.label: self._pieces(p, evidence.vector) for p in evidence.passages}
        asked = terms(evidence.question)
        scored = [
            _Piece(label, position, piece.text, piece.score, _ranked(piece, asked))
            for label, found in pieces.items()
            for position, piece in enumerate(found)
            if piece.score is not None
        ]
        if not scored:
            return self._unscored(evidence.passages)
        best = max(piece.similarity for piece in scored)
        if best < self.min_similarity:
            return Extracted(False, best, ABSTENTION)
        chosen = self._choose(scored, pieces)
        return Extracted(True, best, _labelled(chosen), tuple(sorted({c.label for c in chosen})))

    def _pieces(self, passage: PromptPassage, vector: np.ndarray | None) -> list[ScoredPiece]:
        """The passage's whole text in scored pieces: a prompt cuts a passage short for the
        model's context, which weighing its sentences does not need."""
        text = passage.passage.text
        found = stored_chunk(passage.passage)
        rows = None
        if found is not None and vector is not None:
            rows = kept_rows(text, text, self.stored_rows(*found))
        return scored_pieces(text, rows, vector)

    def _choose(self, scored: list[_Piece], pieces: dict[int, list[ScoredPiece]]) -> list[_Piece]:
        chosen: dict[tuple[int, int], _Piece] = {}
        said: set[str] = set()
        chars = 0
        best = max(piece.score for piece in scored)
        for piece in sorted(scored, key=lambda p: -p.score):
            if len(chosen) >= MAX_PIECES or piece.score < best - NEAR_BEST:
                break
            group = [piece, *_neighbours(piece, pieces[piece.label])]
            if any(" ".join(p.text.split()) in said for p in group):
                continue  # overlapping chunks hold the same sentence twice
            size = sum(len(p.text) for p in group)
            if chosen and chars + size > MAX_CHARS:
                continue
            for p in group:
                chosen[(p.label, p.position)] = p
                said.add(" ".join(p.text.split()))
            chars += size
        return [chosen[key] for key in sorted(chosen)]

    def _unscored(self, passages: Sequence[PromptPassage]) -> Extracted:
        """No passage could be weighed: answerable, each passage's opening its answer; with no
        passage at all, nothing answers (unless abstention is off: the model may still)."""
        chosen: list[_Piece] = []
        for p in passages[:MAX_PIECES]:
            opening = scored_pieces(p.text, None, None)
            text = next((piece.text for piece in opening if len(piece.text.split()) >= 3), "")
            if text:
                chosen.append(_Piece(p.label, 0, text, 0.0, 0.0))
        if not chosen:
            return Extracted(self.min_similarity <= -1.0, None, ABSTENTION)
        return Extracted(True, None, _labelled(chosen), tuple(c.label for c in chosen))


def _neighbours(piece: _Piece, pieces: list[ScoredPiece]) -> list[_Piece]:
    """The pieces a chosen one needs to be read: the one before when it starts mid-sentence (a
    lower-case start, after an abbreviation's full stop), and the one after when it does not end
    a sentence (a colon introducing an example, "run the command" before the command); each
    when short."""
    found = []
    text = piece.text.strip()
    if text[:1].islower() and piece.position > 0:
        found.append(_neighbour(piece, pieces, piece.position - 1))
    if not text.endswith((".", "!", "?", ".)", '."')) and piece.position + 1 < len(pieces):
        found.append(_neighbour(piece, pieces, piece.position + 1))
    return [p for p in found if p is not None]


def _neighbour(piece: _Piece, pieces: list[ScoredPiece], position: int) -> _Piece | None:
    text = pieces[position].text
    if not text.strip() or len(text) > FOLLOWER_CHARS:
        return None
    return _Piece(piece.label, position, text, 0.0, 0.0)


def _ranked(piece: ScoredPiece, asked: set[str]) -> float:
    """A piece's rank: its similarity, and ``WORDS_WEIGHT`` for the share of the question's
    content words (``app.stages.grounding.terms``) it holds, which a sentence embedding weighs
    too little ("catch an exception": the sentence that says ``except``)."""
    similarity = piece.score or 0.0
    if not asked:
        return similarity
    return similarity + WORDS_WEIGHT * len(asked & terms(piece.text)) / len(asked)


def _labelled(chosen: list[_Piece]) -> str:
    """The pieces in order, each passage's run of them followed by its label."""
    parts: list[str] = []
    for i, piece in enumerate(chosen):
        parts.append(piece.text.strip())
        following = chosen[i + 1] if i + 1 < len(chosen) else None
        if following is None or following.label != piece.label:
            parts[-1] = f"{parts[-1]} [{piece.label}]"
    return _joined(parts)


def _joined(parts: list[str]) -> str:
    """Pieces as prose, their line wrapping undone; a piece of code (``_is_code``) keeps its
    lines and stands on lines of its own."""
    out = ""
    for part in parts:
        code = _is_code(part)
        text = part if code else " ".join(part.split())
        if not out:
            out = text
        elif code or out.endswith(":") or "\n" in out.rsplit("[", 1)[-1]:
            out = f"{out}\n{text}"
        else:
            out = f"{out} {text}"
    return out


def _is_code(piece: str) -> bool:
    """Whether most of a piece's lines after its first are indented or prompts (``>>>``,
    ``...``, ``$``): an example, whose lines mean something."""
    lines = [line for line in piece.splitlines()[1:] if line.strip()]
    if not lines:
        return piece.lstrip().startswith((">>>", "$ "))
    marked = sum(line.startswith(("  ", "\t", ">>>", "...", "$ ")) for line in lines)
    return marked * 2 >= len(lines)
