"""What the pipeline hands back for one answer: the prepared question, its events, its outcome.

``Pipeline.prepare`` returns a ``Prepared``; ``Pipeline.generate`` yields ``AnswerDelta`` events
of moderated text, then one ``AnswerDone`` carrying the ``AnswerOutcome``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.stages import Attributed, Generated, Quarantined
from inference import AssembledPrompt, Usage
from retrieval import Passage
from tracing.budget import BudgetSession, DeadlinePassed, Plan


@dataclass
class Prepared:
    """A question ready for generation: its passages, its prompt, and its budget session (which
    holds the plan and the generation time reserved at the target)."""

    question: str
    passages: list[Passage]
    prompt: AssembledPrompt
    session: BudgetSession
    quarantined: list[Quarantined] = field(default_factory=list)
    """Retrieved passages kept out of the prompt: they carried instructions for the model."""

    @property
    def plan(self) -> Plan:
        return self.session.planned

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


@dataclass(frozen=True)
class AnswerDelta:
    """Moderated answer text, as it may be sent."""

    text: str


@dataclass(frozen=True)
class AnswerDone:
    """The last event of an answer: how it ended, its usage, its text as sent."""

    outcome: AnswerOutcome


AnswerEvent = AnswerDelta | AnswerDone


def finish_reason(generated: Generated | None, error: BaseException | None) -> str:
    """How the answer ended, as the report and the span say it."""
    if isinstance(error, DeadlinePassed):
        return "deadline"
    if error is not None:
        return "cancelled" if not isinstance(error, Exception) else "error"
    if generated is None:
        return "cancelled"
    return "length" if generated.finish_reason == "yielded" else generated.finish_reason
