"""Retrieval fixtures: the shipped MiniLM loaded once, a tiny local cross-encoder, the corpus."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.harness.tiny_cross_encoder import build_tiny_cross_encoder
from retrieval import DocumentStore, Embedder

DEMO_CORPUS = Path(__file__).resolve().parents[2] / "demo" / "corpus"


@pytest.fixture(scope="session")
def demo_corpus() -> Path:
    return DEMO_CORPUS


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DocumentStore]:
    """An open, empty store in the test's own directory."""
    opened = DocumentStore(tmp_path / "store")
    opened.open()
    yield opened
    opened.close()


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The real shipped MiniLM (loads in a few seconds, once per session)."""
    model = Embedder()
    model.load()
    return model


@pytest.fixture(scope="session")
def tiny_cross_encoder_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A randomly initialised one-layer BERT cross-encoder saved locally (scores are noise)."""
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-cross-encoder"))


@pytest.fixture
def no_tesseract(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tesseract cannot be found: ``PATH`` without the folders that hold it (as on a machine
    without Debian's tesseract-ocr)."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    kept = [folder for folder in folders if not (Path(folder) / "tesseract").exists()]
    monkeypatch.setenv("PATH", os.pathsep.join(kept))
