"""Inference fixtures: the real SmolLM2 backend, loaded once, and a passage type."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from inference import LlamaCppBackend


@dataclass(frozen=True)
class Doc:
    """Satisfies ``inference.ContextPassage`` as ``retrieval.Passage`` does."""

    text: str
    title: str = "Data Structures"
    section: str = "Lists"
    source: str = "tutorial/datastructures.rst.txt"


@pytest.fixture(scope="session")
async def llama_backend() -> AsyncIterator[LlamaCppBackend]:
    backend = LlamaCppBackend()
    await backend.start()
    yield backend
    await backend.close()
