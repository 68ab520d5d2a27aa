"""Builders for app tests: settings for a data dir, and the app running behind a test client."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from inference import GenerationBackend

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "demo" / "corpus"
#: The part of the demo corpus that the app and bench tests ingest (``seeded_data_dir``).
SUBSET = (
    "tutorial/controlflow.rst.txt",
    "tutorial/datastructures.rst.txt",
    "tutorial/errors.rst.txt",
    "tutorial/modules.rst.txt",
)


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Settings for ``data_dir`` that read no ``.env`` file, with ``overrides`` applied."""
    values: dict[str, Any] = {"data_dir": data_dir, "max_output_tokens": 48}
    values.update(overrides)
    return Settings(_env_file=None, **values)


@contextmanager
def running_app(
    data_dir: Path, *, backend: GenerationBackend | None = None, **overrides: Any
) -> Iterator[TestClient]:
    """The app over ``data_dir`` (started and stopped around the block), behind a test client."""
    app = create_app(make_settings(data_dir, **overrides), backend=backend)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client
