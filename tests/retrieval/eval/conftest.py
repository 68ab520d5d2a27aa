"""The evaluation tests' data folder: the tiny doc tree of ``tests.helpers.python_doc_tree``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.python_doc_tree import write_sources


@pytest.fixture
def eval_data(tmp_path: Path) -> Path:
    """The data folder (what ``--data`` takes) holding the tiny tree."""
    data = tmp_path / "eval"
    write_sources(data)
    return data
