"""Where the checkout keeps what the benches read: the demo corpus, its questions, benchmarks/."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO_CORPUS = REPO / "demo" / "corpus"
DEMO_QUESTIONS = REPO / "demo" / "questions.txt"
BENCHMARKS_DIR = REPO / "benchmarks"
