"""App fixtures: an auth header, and the whole service with the real models.

The seeded data dir and its API key are shared with the bench tests: see ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.helpers.app import running_app


@pytest.fixture(scope="session")
def auth(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


@pytest.fixture(scope="session")
def real_client(seeded_data_dir: Path, span_exporter: Any) -> Iterator[TestClient]:
    """The whole service with the real models: MiniLM, SmolLM2 via llama.cpp, the classifier."""
    with running_app(seeded_data_dir) as client:
        yield client
