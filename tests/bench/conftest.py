"""Bench fixtures: plots built but not rendered, for tests of BENCHMARKS.md's text."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from bench.harness import plots


@pytest.fixture
def unrendered_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each plot's figure is built from the runs as ever, but saved as an empty file: laying
    out and rasterizing a PNG takes about 0.2 s, five of them per BENCHMARKS.md. For tests that
    read the text only; ``tests/bench/test_benchmarks_md.py::test_write_benchmarks`` renders
    them and checks what it wrote."""

    def save(fig: Figure, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        return path

    monkeypatch.setattr(plots, "_save", save)
