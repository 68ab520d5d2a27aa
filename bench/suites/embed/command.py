"""``ragtime bench embed``: its options and its run (the measurement, ``backends``, loads FAISS
and the embedders, so it is imported only when the command runs)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``embed`` to ``ragtime bench``'s subcommands."""
    embed = subparsers.add_parser(
        "embed",
        help="the embedding backends side by side: torch, onnx, onnx-int8 (speed, agreement)",
    )
    embed.add_argument("--chunks", type=int, default=0, help="demo chunks compared (0 = all)")
    embed.add_argument("--rounds", type=int, default=5, help="timing rounds")
    embed.add_argument("--batches", type=int, default=6, help="batches of 32 timed per round")
    embed.add_argument("--tokens", type=int, default=100, help="tokens per timed passage")
    embed.add_argument("--cache-dir", type=Path, help="ONNX exports (default: a temp dir)")
    embed.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.suites.embed.backends import measure

    print(
        measure(args.chunks, args.rounds, args.cache_dir, batches=args.batches, tokens=args.tokens)
    )
    return 0
