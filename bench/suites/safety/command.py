"""``ragtime bench safety``: its options and its run (``scoring`` measures)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``safety`` to ``ragtime bench``'s subcommands."""
    safety = subparsers.add_parser(
        "safety",
        help="precision and recall of the injection screen and the PII redaction",
        description="In-process, no server or model: the passage screen "
        "(app/safety/injection.py) and the redaction (app/safety/redaction.py) on the labelled "
        "sets of "
        "bench/suites/safety/labelled_sets.py and the demo "
        "corpus (all clean), with their cost per passage.",
    )
    safety.add_argument("--corpus", type=Path, help="clean passages (default: demo/corpus)")
    safety.add_argument("--json", type=Path, help="write the figures here")
    safety.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from bench.harness.paths import DEMO_CORPUS
    from bench.harness.record import write_figures
    from bench.suites.safety.scoring import measure, table

    result = measure(args.corpus or DEMO_CORPUS)
    print(table(result))
    if args.json:
        write_figures(dataclasses.asdict(result), args.json)
    return 0
