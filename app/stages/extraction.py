"""The extract stage: whether the prompt's passages can answer the question at all, and the
answer they give in their own words, with no model call.

Each prompt passage (the whole of it, not only what a prompt cut short to fit the model's
context holds) is cut into pieces where a sentence ends and each piece scored by its
sentence's similarity to the question (``retrieval.store.sentences.scored_pieces``: the sentence
vectors ingest kept, as context pruning scores them; a piece that is itself a question, such as
an FAQ's heading, is weighed as a heading, not as an answer). Then:

* **answerable**: the best piece's similarity reaches ``min_similarity``
  (``RAGTIME_ANSWERABLE_MIN_SIMILARITY``), or a heading asks nearly the same question
  (``HEADING_ANSWERS``). Otherwise no passage is close enough to answer, and the request
  abstains ("The documents do not answer this.") without spending generation. The threshold
  was calibrated on the labelled sets' unanswerable and answerable questions
  (``ragtime eval answerable``; docs/studies/answers.md, "Answers a user can trust").
* **the extractive answer** (``app.stages.excerpts``): the one stretch of one passage that best
  answers, a few consecutive sentences that cross no heading, followed by its ``[n]``. Every
  word is the passage's: nothing is made up, and the answer says where it came from.

A passage whose sentence vectors were not kept (a snapshot built before ingest kept them) is not
scored; when no passage is, the question counts as answerable and the extractive answer is
each passage's opening, so that an old collection loses nothing it had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from app.stages.attribution import StoredRows, kept_rows, stored_chunk
from app.stages.excerpts import Piece, excerpt, labelled
from app.stages.result import StageResult
from inference.prompt import PromptPassage
from retrieval.store.sentences import ScoredPiece, scored_pieces
from tracing.budget import Allowance, StageName

#: What an answer says when no passage is close enough to the question.
ABSTENTION = "The documents do not answer this."
#: How many passages' openings answer when no passage could be weighed.
OPENINGS = 3
#: A heading (an FAQ's question) at least this close to the question shows the documents answer
#: it, whatever its sentences score: two questions alike run closer than a question and its
#: answer. On the labelled sets no unanswerable question came closer than 0.50 to a heading, and
#: two answerable ones its sentences scored below the threshold did (0.78, 0.86).
HEADING_ANSWERS = 0.7


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
        scores = [p.score for found in pieces.values() for p in found if p.score is not None]
        if not scores:
            return self._unscored(evidence.passages)
        best = max(scores)
        if best < self.min_similarity and not self._asked_before(pieces):
            return Extracted(False, best, ABSTENTION)
        chosen = excerpt(evidence.question, evidence.passages, pieces)
        if not chosen:  # every scored piece barred by the injection screen
            return Extracted(False, best, ABSTENTION)
        return Extracted(True, best, labelled(chosen), tuple(sorted({c.label for c in chosen})))

    def _asked_before(self, pieces: dict[int, list[ScoredPiece]]) -> bool:
        """Whether a passage holds a heading that asks the question (``HEADING_ANSWERS``)."""
        least = max(self.min_similarity, HEADING_ANSWERS)
        return any(p.asks is not None and p.asks >= least for f in pieces.values() for p in f)

    def _pieces(self, passage: PromptPassage, vector: np.ndarray | None) -> list[ScoredPiece]:
        """The passage's whole text in scored pieces: a prompt cuts a passage short for the
        model's context, which weighing its sentences does not need."""
        text = passage.passage.text
        found = stored_chunk(passage.passage)
        rows = None
        if found is not None and vector is not None:
            rows = kept_rows(text, text, self.stored_rows(*found))
        return scored_pieces(text, rows, vector)

    def _unscored(self, passages: Sequence[PromptPassage]) -> Extracted:
        """No passage could be weighed: answerable, each passage's opening its answer; with no
        passage at all, nothing answers (unless abstention is off: the model may still)."""
        chosen: list[Piece] = []
        for p in passages[:OPENINGS]:
            opening = scored_pieces(p.text, None, None)
            text = next((piece.text for piece in opening if len(piece.text.split()) >= 3), "")
            if text:
                chosen.append(Piece(p.label, 0, text))
        if not chosen:
            return Extracted(self.min_similarity <= -1.0, None, ABSTENTION)
        return Extracted(True, None, labelled(chosen), tuple(c.label for c in chosen))
