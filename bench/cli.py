"""``ragtime bench``: one subcommand per suite of ``bench.suites``, each registering its options
and dispatching to its ``run``. ``app/cli/commands.py`` reaches the bench through ``register``
only."""

from __future__ import annotations

import importlib.util
from typing import Any

# The [bench] extra's dependency: without it, ``ragtime bench`` says how to install the extra.
if importlib.util.find_spec("matplotlib") is None:
    raise ImportError("the [bench] extra is not installed (no matplotlib)")

from bench.suites import (
    answers,
    attribution,
    budget,
    burst,
    ceiling,
    documents,
    embed,
    embed_threads,
    load,
    machinery,
    neighbours,
    ocr,
    overload,
    peers,
    quality,
    recovery,
    report,
    retrieval,
    safety,
    section,
)

#: The subcommands of ``ragtime bench``, in the order its help lists them.
SUITES = (
    load,
    budget,
    machinery,
    embed,
    embed_threads,
    quality,
    safety,
    ocr,
    documents,
    retrieval,
    attribution,
    burst,
    ceiling,
    peers,
    overload,
    recovery,
    neighbours,
    answers,
    report,
    section,
)


def register(sub: Any) -> None:
    """Add ``bench`` and its subcommands to the ``ragtime`` parser's subparsers."""
    bench = sub.add_parser("bench", help="load runs and benchmarks (BENCHMARKS.md)")
    subparsers = bench.add_subparsers(dest="bench_command", required=True)
    for suite in SUITES:
        suite.register(subparsers)
