"""A tiny, randomly initialised cross-encoder, built locally when a bench starts.

It exists only so that the rerank stage runs in benches (the offline default ships no
cross-encoder, and benches never reach a model hub): with ``RAGTIME_RERANKER_MODEL`` pointing at
it, ragtime loads it and reranks, so a fault injected into rerank
(``RAGTIME_FAULT_RERANK_DELAY_MS``) has a stage to slow down. It is NOT a quality model: its
scores are random and mean nothing. The builder is the tests' (``tests/fakes/tiny_models.py``),
run in a subprocess from the checkout, as ``fake_sglang`` builds its tokenizer.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_CODE = (
    "import sys; from pathlib import Path; "
    "from tests.fakes.tiny_models import build_tiny_cross_encoder; "
    "build_tiny_cross_encoder(Path(sys.argv[1]))"
)


def build_tiny_cross_encoder(dir: Path) -> Path:
    """Save the tests' one-layer BERT cross-encoder and its tokenizer in ``dir``; return ``dir``.

    ``sentence_transformers.CrossEncoder(str(dir))`` loads it without network access.
    """
    dir = dir.resolve()
    subprocess.run([sys.executable, "-c", _CODE, str(dir)], check=True, cwd=REPO)
    return dir
