"""``ragtime bench report``: write BENCHMARKS.md from the JSON files of ``make bench``'s runs
(``bench.report.benchmarks_md``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``report`` to ``ragtime bench``'s subcommands."""
    report = subparsers.add_parser("report", help="write BENCHMARKS.md from bench JSON files")
    report.add_argument("--cpu", type=Path, required=True, help="JSON of the CPU default run")
    report.add_argument("--overhead", type=Path, required=True, help="JSON of null vs floor")
    report.add_argument(
        "--ceiling",
        type=Path,
        action="append",
        required=True,
        help="JSON of a rate sweep (repeatable: the null backend's, the floor's)",
    )
    report.add_argument(
        "--budget", type=Path, help="JSON of `ragtime bench budget` (adds its section)"
    )
    report.add_argument(
        "--prefix",
        type=Path,
        help="JSON of the prefix-caching run, prefix-shared vs prefix-naive (adds its section)",
    )
    report.add_argument(
        "--prefix-fake",
        type=Path,
        help="JSON of `bench load --fake-sglang` over the prefix-sim configs",
    )
    report.add_argument(
        "--prefix-states",
        type=Path,
        help="JSON of the repeat-traffic run, prompt states kept vs none (adds a targets row)",
    )
    report.add_argument(
        "--profile",
        type=Path,
        help="py-spy samples of the null-backend server (`bench load --profile`): where the "
        "time of a row that misses its target goes",
    )
    report.add_argument(
        "--out", type=Path, default=Path("BENCHMARKS.md"), help="the Markdown file written"
    )
    report.add_argument(
        "--plots", type=Path, default=Path("benchmarks"), metavar="DIR",
        help="where the plots are written",
    )  # fmt: skip
    report.add_argument(
        "--setup-command",
        default="ragtime setup-demo",
        help="how the data dir was prepared, as BENCHMARKS.md should show it",
    )
    report.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.harness.record import read_json
    from bench.report.benchmarks_md import write_benchmarks
    from bench.suites.budget.faults import read_budget_json

    written = write_benchmarks(
        args.out,
        cpu=read_json(args.cpu),
        overhead=read_json(args.overhead),
        ceilings=[read_json(path) for path in args.ceiling],
        plot_dir=args.plots,
        setup_command=args.setup_command,
        budget=read_budget_json(args.budget) if args.budget else None,
        prefix=read_json(args.prefix) if args.prefix else None,
        prefix_fake=read_json(args.prefix_fake) if args.prefix_fake else None,
        prefix_states=read_json(args.prefix_states) if args.prefix_states else None,
        profile=args.profile,
    )
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0
