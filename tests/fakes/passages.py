"""A passage that stands in for ``retrieval.Passage`` where inference tests need one."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Doc:
    """Satisfies ``inference.ContextPassage`` as ``retrieval.Passage`` does."""

    text: str
    title: str = "Data Structures"
    section: str = "Lists"
    source: str = "tutorial/datastructures.rst.txt"
