"""App fixtures: auth headers, and the whole service with the real models.

The seeded data dirs and their API keys are shared with the bench tests: see
``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval import Embedder
from tests.helpers.app import running_app


@pytest.fixture(scope="session")
def auth(api_key: str) -> dict[str, str]:
    """The header of a key in ``seeded_data_dir``."""
    return {"Authorization": f"Bearer {api_key}"}


@pytest.fixture(scope="session")
def minilm_auth(minilm_api_key: str) -> dict[str, str]:
    """The header of a key in ``minilm_data_dir``."""
    return {"Authorization": f"Bearer {minilm_api_key}"}


@pytest.fixture(scope="session")
def real_client(minilm_data_dir: Path, span_exporter: Any) -> Iterator[TestClient]:
    """The whole service with the real models: MiniLM, SmolLM2 via llama.cpp, the classifier."""
    with running_app(minilm_data_dir, embedder=Embedder()) as client:
        yield client
