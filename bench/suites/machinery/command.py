"""``ragtime bench machinery``: its options and its run (the measurement, ``cost``, loads the
budget engine and the tracer, so it is imported only when the command runs)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``machinery`` to ``ragtime bench``'s subcommands."""
    machinery = subparsers.add_parser(
        "machinery",
        help="what the budget and tracing machinery costs per request (in-process, no HTTP)",
    )
    machinery.add_argument("--iterations", type=int, default=5000, help="requests timed")
    machinery.add_argument("--json", type=Path, help="write the result here")
    machinery.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.harness.record import write_json
    from bench.suites.machinery.cost import machinery_line, measure_machinery

    cost = measure_machinery(args.iterations)
    print(machinery_line(cost) + ".")
    if args.json:
        write_json(cost, args.json)
    return 0
