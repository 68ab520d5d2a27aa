"""What the pipeline hands back for one answer: the prepared question, its events, its outcome.

``Pipeline.answer`` yields a ``Prepared`` first (the passages and the prompt, the answer
planned), then ``AnswerDelta`` events of moderated text, then one ``AnswerDone`` carrying the
``AnswerOutcome``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.stages import Assembled, Attributed, Generated, Quarantined
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

    @property
    def prompt(self) -> AssembledPrompt:
        return self.assembled.prompt

    @property
    def with_answer(self) -> bool:
        """False when the budget allowed only the passages (``on_infeasible = "passages"``)."""
        return self.plan.max_output_tokens > 0


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
    """The model that was asked (the generation backend's)."""


@dataclass(frozen=True)
class AnswerDelta:
    """Moderated answer text, as it may be sent."""

    text: str


@dataclass(frozen=True)
class AnswerDone:
    """The last event of an answer: how it ended, its usage, its text as sent."""

    outcome: AnswerOutcome


AnswerEvent = AnswerDelta | AnswerDone
PipelineEvent = Prepared | AnswerDelta | AnswerDone


def finish_reason(generated: Generated | None, error: BaseException | None) -> str:
    """How the answer ended, as the report and the span say it."""
    if isinstance(error, DeadlinePassed):
        return "deadline"
    if error is not None:
        return "cancelled" if not isinstance(error, Exception) else "error"
    if generated is None:
        return "cancelled"
    return "length" if generated.finish_reason == "yielded" else generated.finish_reason
