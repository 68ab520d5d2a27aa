"""Inference fixtures: the real SmolLM2 backend, loaded once, and a tiny tokenizer for the
remote backends' tests (a module may define its own ``tokenizer`` instead)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bench.sglang_sim.tokenizer import build_tiny_tokenizer
from inference import HFTokenizer, LlamaCppBackend


@pytest.fixture(scope="session")
async def llama_backend() -> AsyncIterator[LlamaCppBackend]:
    backend = LlamaCppBackend()
    await backend.start()
    yield backend
    await backend.close()


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> HFTokenizer:
    tok = HFTokenizer(build_tiny_tokenizer(tmp_path_factory.mktemp("tok")), local_files_only=True)
    tok.load()
    return tok
