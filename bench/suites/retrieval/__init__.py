"""``ragtime bench retrieval``: FAISS index types at collection sizes, on synthetic vectors."""

from bench.suites.retrieval.command import register, run

__all__ = ["register", "run"]
