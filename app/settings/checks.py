"""The checks around an answer: moderation of the question, the passages and the answer, and
the attribution of the answer's sentences to passages."""

from __future__ import annotations

from pydantic import BaseModel, Field

#: Similarity at which an answer sentence is attributed to a passage; how it was chosen, on a
#: labelled set from the demo corpus: ``app/stages/citations.py``.
DEFAULT_ATTRIBUTION_THRESHOLD = 0.725


class CheckSettings(BaseModel):
    """Moderation's threshold; attribution's threshold and priority."""

    moderation_threshold: float = Field(0.9, gt=0.0, le=1.0)
    attribution_threshold: float = Field(
        DEFAULT_ATTRIBUTION_THRESHOLD,
        ge=-1.0,
        le=1.0,
        description="Cosine similarity at which an answer sentence is attributed to a passage "
        "when its words do not decide it (app/stages/lexical.py; chosen on a labelled set: "
        "app/stages/citations.py).",
    )
    attribution_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="How many steps below the process's priority the attribution stage's "
        "threads run (Linux). It works after an answer's last token, for its done event: "
        "under load the CPU goes first to the stages before someone's first token. 0: the "
        "same priority.",
    )
