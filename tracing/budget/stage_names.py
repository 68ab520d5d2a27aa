"""The stages of a request, by name: the one list that the plan's reservations (in its order:
``allowances.reserved_after``), the cost model's priors, the stage threads, the pipeline, the
spans and the metrics all use.

A ``StrEnum``: each member is its name as a string, so a span, a metric label or a JSON key
reads ``embed``, never ``StageName.EMBED``.
"""

from __future__ import annotations

from enum import StrEnum


class StageName(StrEnum):
    """Every stage of an answer, in the order it runs (a search runs the first ones)."""

    AUTH = "auth"
    MODERATE_QUESTION = "moderate.question"
    EMBED = "embed"
    SEARCH = "search"
    KEYWORD = "keyword"
    RERANK = "rerank"
    MODERATE_PASSAGES = "moderate.passages"
    ASSEMBLE = "assemble"
    EXTRACT = "extract"
    GENERATE = "generate"
    MODERATE_ANSWER = "moderate.answer"
    ATTRIBUTE = "attribute"


#: The stages the plan does not size but every answer passes through: counted around it.
AROUND_THE_PLAN = (StageName.EMBED, StageName.SEARCH, StageName.MODERATE_ANSWER)
