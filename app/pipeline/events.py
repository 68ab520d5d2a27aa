"""What the pipeline hands back for one answer: the prepared question, its events, its outcome.

``Pipeline.answer`` yields a ``Prepared`` first (the passages and the prompt, the answer
planned, the evidence weighed), then ``AnswerDelta`` events of moderated text (an
``AnswerReplaced`` when ``auto`` answered from the passages after the model had begun), then one
``AnswerDone`` carrying the ``AnswerOutcome``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from app.settings import AnswerMode
from app.stages import ABSTENTION, Assembled, Attributed, Extracted, Generated, Quarantined
from inference import AssembledPrompt, Usage
from retrieval import Passage
from tracing.budget import DeadlinePassed, Plan


@dataclass
class Prepared:
    """A question ready for generation: its passages, its prompt and its plan (the answer's
    generation time held at its target from then on, by the request's budget session)."""

    question: str
    passages: list[Passage]
    assembled: Assembled
    plan: Plan
    quarantined: list[Quarantined] = field(default_factory=list)
    """Retrieved passages kept out of the prompt: they carried instructions for the model."""
    extracted: Extracted | None = None
    """The evidence weighed: whether it can answer, and its own answer (the extract stage)."""
    mode: AnswerMode = "generate"
    """Who was asked to write the answer."""

    @property
    def prompt(self) -> AssembledPrompt:
        return self.assembled.prompt

    @property
    def with_answer(self) -> bool:
        """False when the budget allowed only the passages (``on_infeasible = "passages"``)."""
        return self.plan.max_output_tokens > 0

    @property
    def answerable(self) -> bool:
        """Whether a passage is close enough to the question to answer it."""
        return self.extracted is None or self.extracted.answerable

    @property
    def generates(self) -> bool:
        """Whether the model writes the answer: it may, the plan gives it tokens, and the
        passages can answer."""
        return self.mode != "extract" and self.with_answer and self.answerable

    @property
    def from_evidence(self) -> bool:
        """Whether the passages' own answer (or the abstention) is the answer, with no model
        call: asked for, the budget too small for generation in ``auto``, or not answerable."""
        if self.extracted is None:
            return False
        return (
            not self.answerable
            or self.mode == "extract"
            or (self.mode == "auto" and not self.with_answer)
        )


@dataclass
class AnswerOutcome:
    """How an answer ended: built by ``Pipeline.generate`` and delivered in its ``AnswerDone``."""

    text: str = ""  # the moderated answer, as sent
    usage: Usage | None = None
    finish_reason: str = "unknown"
    ttft_ms: float | None = None
    redactions: dict[str, int] = field(default_factory=dict)
    attribution: Attributed | None = None
    """The passages the answer cites and how that was found (the attribute stage)."""
    model: str = ""
    """The model that was asked (the generation backend's); empty when none was."""
    written_by: Literal["generate", "extract", "abstain"] = "generate"
    """Who wrote the text: the model, the passages' own sentences, or the abstention."""
    answerable: bool = True
    """Whether a passage was close enough to the question to answer it."""
    similarity: float | None = None
    """The best passage sentence's similarity to the question (the extract stage's)."""

    @classmethod
    def from_evidence(cls, extracted: Extracted) -> AnswerOutcome:
        """The passages' own answer, or the abstention when they cannot answer (or have
        nothing to quote)."""
        said = extracted.answerable and bool(extracted.cited)
        return cls(
            text=extracted.text if said else ABSTENTION,
            finish_reason="stop",
            written_by="extract" if said else "abstain",
            answerable=said,
            similarity=extracted.similarity,
        )


@dataclass(frozen=True)
class AnswerDelta:
    """Moderated answer text, as it may be sent."""

    text: str


@dataclass(frozen=True)
class AnswerReplaced:
    """The answer is this text instead of what was sent so far: ``auto`` took the passages'
    own answer after the model's was cut short or not borne out by them."""

    text: str


@dataclass(frozen=True)
class AnswerDone:
    """The last event of an answer: how it ended, its usage, its text as sent."""

    outcome: AnswerOutcome


AnswerEvent = AnswerDelta | AnswerReplaced | AnswerDone
PipelineEvent = Prepared | AnswerDelta | AnswerReplaced | AnswerDone


def finish_reason(generated: Generated | None, error: BaseException | None) -> str:
    """How the answer ended, as the report and the span say it."""
    if isinstance(error, DeadlinePassed):
        return "deadline"
    if error is not None:
        return "cancelled" if not isinstance(error, Exception) else "error"
    if generated is None:
        return "cancelled"
    return "length" if generated.finish_reason == "yielded" else generated.finish_reason
