"""``ragtime bench section``: write one block of BENCHMARKS.md in place, between its markers:
the budget engine's (goodput, quality per saving), a fresh process's first requests, bursts,
the ceiling as a share of the floor's by a compiled load generator, overload and the
engine's priority scheduling, answers beside CPU-bound neighbours, the answers themselves by
answer mode and budget, ragtime beside the same-work floor and the Haystack peer."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``section`` to ``ragtime bench``'s subcommands."""
    section = subparsers.add_parser(
        "section",
        help="write the budget engine's section of BENCHMARKS.md (goodput, quality per saving, "
        "a fresh process's first requests)",
    )
    section.add_argument(
        "--goodput", type=Path, action="append", default=[], help="JSON of a goodput run"
    )
    section.add_argument("--quality", type=Path, help="JSON of `ragtime bench quality`")
    section.add_argument(
        "--fresh",
        type=Path,
        help="JSON of `ragtime bench budget --fresh-starts` (writes its own block; alone, "
        "only that block)",
    )
    section.add_argument(
        "--burst",
        type=Path,
        action="append",
        default=[],
        help="JSON of `ragtime bench burst` (writes the bursts block; alone, only that block)",
    )
    section.add_argument(
        "--burst-before", type=Path, help="JSON of the previous burst run, for its figures"
    )
    section.add_argument(
        "--ceiling",
        type=Path,
        help="JSON of `ragtime bench ceiling` (writes the compiled-generator ceiling block; "
        "alone, only that block)",
    )
    section.add_argument(
        "--client-ceiling",
        type=Path,
        action="append",
        default=[],
        help="with --ceiling: JSON of a `ragtime bench load --rates` sweep, for the ceilings the "
        "bench's own client found",
    )
    section.add_argument(
        "--overload",
        type=Path,
        help="JSON of `ragtime bench overload` (writes its own block; alone, only that block)",
    )
    section.add_argument(
        "--neighbours",
        type=Path,
        help="JSON of `ragtime bench neighbours` (writes its own block; alone, only that block)",
    )
    section.add_argument(
        "--answers",
        type=Path,
        action="append",
        default=[],
        help="JSON of `ragtime bench answers` (or `eval answers`), one a set (writes the answers "
        "block; alone, only that block)",
    )
    section.add_argument(
        "--peers",
        type=Path,
        help="JSON of `ragtime bench peers` (writes its own block; alone, only that block)",
    )
    section.add_argument(
        "--out", type=Path, default=Path("BENCHMARKS.md"), help="the Markdown file it updates"
    )
    section.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.report.budget_md import write_section
    from bench.suites.budget.goodput import read_goodput_json
    from bench.suites.quality.measure import QualityResult

    if (
        args.goodput
        or args.quality
        or not (
            args.fresh
            or args.burst
            or args.ceiling
            or args.overload
            or args.neighbours
            or args.answers
            or args.peers
        )
    ):
        goodputs = [read_goodput_json(path) for path in args.goodput]
        quality = (
            QualityResult.model_validate_json(args.quality.read_text()) if args.quality else None
        )
        write_section(args.out, goodputs, quality)
        print(f"wrote the budget engine's section of {args.out}", file=sys.stderr)
    if args.fresh:
        from bench.report.fresh_md import write_section as write_fresh_section
        from bench.suites.budget.fresh import read_fresh_json

        write_fresh_section(args.out, read_fresh_json(args.fresh))
        print(f"wrote the fresh-process section of {args.out}", file=sys.stderr)
    if args.burst:
        from bench.report.burst_md import read_burst_json
        from bench.report.burst_md import write_section as write_burst_section

        before = read_burst_json(args.burst_before) if args.burst_before else None
        write_burst_section(args.out, [read_burst_json(p) for p in args.burst], before)
        print(f"wrote the bursts section of {args.out}", file=sys.stderr)
    if args.ceiling:
        from bench.harness.record import read_json
        from bench.report.ceiling_md import write_section as write_ceiling_section
        from bench.suites.ceiling.results import read_ceiling_json

        client = [read_json(p) for p in args.client_ceiling]
        write_ceiling_section(args.out, read_ceiling_json(args.ceiling), client)
        print(f"wrote the compiled-generator ceiling section of {args.out}", file=sys.stderr)
    if args.overload:
        from bench.report.overload_md import read_overload_json
        from bench.report.overload_md import write_section as write_overload_section

        write_overload_section(args.out, read_overload_json(args.overload))
        print(f"wrote the overload section of {args.out}", file=sys.stderr)
    if args.neighbours:
        from bench.report.neighbours_md import read_neighbours_json
        from bench.report.neighbours_md import write_section as write_neighbours_section

        write_neighbours_section(args.out, read_neighbours_json(args.neighbours))
        print(f"wrote the neighbours section of {args.out}", file=sys.stderr)
    if args.answers:
        from bench.report.answers_md import read_answers_json
        from bench.report.answers_md import write_section as write_answers_section

        write_answers_section(args.out, [read_answers_json(p) for p in args.answers])
        print(f"wrote the answers section of {args.out}", file=sys.stderr)
    if args.peers:
        from bench.report.peers_md import read_peers_json
        from bench.report.peers_md import write_section as write_peers_section

        write_peers_section(args.out, read_peers_json(args.peers))
        print(f"wrote the references section of {args.out}", file=sys.stderr)
    return 0
