"""Inference fixtures: the real SmolLM2 backend, loaded once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from inference import LlamaCppBackend


@pytest.fixture(scope="session")
async def llama_backend() -> AsyncIterator[LlamaCppBackend]:
    backend = LlamaCppBackend()
    await backend.start()
    yield backend
    await backend.close()
