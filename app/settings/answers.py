"""What an answer may say: who writes it (the model, the evidence, or the model with the evidence
to fall back on), and how close a passage must be to the question for the service to answer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

#: Who writes an answer: the model (``generate``), the passages' own sentences (``extract``), or
#: the model with the passages' sentences to fall back on (``auto``).
AnswerMode = Literal["generate", "extract", "auto"]

#: The least similarity of a passage's sentence to the question for the service to answer;
#: calibrated on the labelled sets (``app/stages/extraction.py``).
DEFAULT_ANSWERABLE_MIN_SIMILARITY = 0.5


class AnswerSettings(BaseModel):
    """Answer modes and abstention."""

    answer_mode: AnswerMode | None = Field(
        None,
        description="Who writes answers unless a request says: `generate` (the model), "
        "`extract` (the stretch of one passage that best answers, with its [n], no model call), "
        "`auto` "
        "(generate; answer from the passages instead, and say so, when generation does not "
        "fit the budget or its answer is not borne out by the passages). Empty: chosen by "
        'backend, as measured (docs/studies/answers.md, "Answers a user can trust"): `extract` for '
        "llama.cpp (SmolLM2-135M: more key facts than its own answers, no loops, milliseconds), "
        "`generate` for the others.",
    )
    answerable_min_similarity: float | None = Field(
        None,
        ge=-1.0,
        le=1.0,
        description="The least cosine similarity of a prompt passage's sentence to the "
        'question for the service to answer; below it, the answer is "The documents do not '
        'answer this." and no generation runs (`answerable: false`). Empty: '
        f"{DEFAULT_ANSWERABLE_MIN_SIMILARITY}, calibrated for the shipped MiniLM embedder on "
        "the labelled sets (app/stages/extraction.py), and off with another embedding model, "
        "whose similarities run on another scale. -1 turns abstention off.",
    )

    @property
    def answerable_threshold(self) -> float:
        """The abstention threshold in force (see ``answerable_min_similarity``)."""
        if self.answerable_min_similarity is not None:
            return self.answerable_min_similarity
        shipped = getattr(self, "embedding_model", None) is None
        return DEFAULT_ANSWERABLE_MIN_SIMILARITY if shipped else -1.0


def default_answer_mode(backend: str) -> AnswerMode:
    """The mode a backend answers in when neither the request nor the setting says: measured
    per backend (docs/studies/answers.md, "Answers a user can trust"). The offline CPU default's
    SmolLM2-135M held fewer key facts than the passages' own sentences on both labelled sets, with
    or without ``auto``'s fallback, and took seconds where they take milliseconds; remote backends
    serve models of any size, unmeasured here, so the model writes."""
    return "extract" if backend == "llama.cpp" else "generate"
