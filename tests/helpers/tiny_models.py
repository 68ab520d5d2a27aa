"""Tiny, randomly initialised models that build locally in about a second, for plumbing tests.

Their scores mean nothing: use them where a test checks that a model loads and runs, not what
it ranks first. The cross-encoder is the one the benches build, so tests and benches exercise
the same model.
"""

from __future__ import annotations

from app.bench.tiny_cross_encoder import build_tiny_cross_encoder

__all__ = ["build_tiny_cross_encoder"]
