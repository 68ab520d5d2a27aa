"""``ragtime bench embed``: the embedding backends side by side (torch, onnx, onnx-int8)."""

from bench.suites.embed.command import register, run

__all__ = ["register", "run"]
