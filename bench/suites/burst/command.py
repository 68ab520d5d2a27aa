"""``ragtime bench burst``: its options and its run (``loads`` sends, ``results`` judges)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

from bench.harness.commands import (
    DEMO_QUESTIONS,
    SECRET_KEYS,
    argv_of,
    positive_ints,
    read_questions,
    run_and_report,
)


def register(subparsers: Any) -> None:
    """Add ``burst`` to ``ragtime bench``'s subcommands."""
    burst = subparsers.add_parser(
        "burst",
        help="bursts of simultaneous questions, and closed loops of users at fixed budgets",
        description="For each CONFIG: --bursts sends SIZE questions at once with a budget of "
        "BUDGET_S seconds, --repeats times each; --users runs closed loops of that many users "
        "at each of --budgets-ms. Reports answered, refused (and how fast), 504s, late answers "
        "and errors against issue 22's targets (bench.suites.burst.results).",
    )
    burst.add_argument(
        "--serve", type=Path, required=True, metavar="CONFIG", action="append",
        help="a RAGTIME_* env file to serve and measure (repeat for several)",
    )  # fmt: skip
    burst.add_argument("--bursts", metavar="SIZE@S[,...]", help="e.g. 25@1,100@1,200@2")
    burst.add_argument("--repeats", type=int, default=3, help="runs of each burst")
    burst.add_argument("--pause", type=float, default=2.0, help="seconds idle before a burst")
    burst.add_argument("--users", type=int, help="closed loops of this many users")
    burst.add_argument(
        "--budgets-ms", type=positive_ints, default=[1500, 900, 600], metavar="MS[,MS...]",
        help="the users' budgets, a run for each",
    )  # fmt: skip
    burst.add_argument("--requests", type=int, default=120, help="requests per users' loop")
    burst.add_argument("--warmup", type=int, default=4, help="uncounted requests first")
    burst.add_argument("--fake-sglang", metavar="SPEC", help="as in `bench load`")
    burst.add_argument("--timeout", type=float, default=30.0, help="per-request limit, s")
    burst.add_argument(
        "--questions", type=Path, default=DEMO_QUESTIONS, help="one question per line"
    )
    burst.add_argument(
        "--log-dir", type=Path, default=Path("bench-results/logs"), help="each server's log"
    )
    burst.add_argument("--json", type=Path, help="write the result here")
    burst.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.harness.record import command_line
    from bench.suites.burst.loads import run_burst_bench
    from bench.suites.burst.results import parse_bursts, text_report, write_burst_json

    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        bursts = parse_bursts(args.bursts) if args.bursts else []
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not bursts and not args.users:
        print("error: give --bursts, --users or both", file=sys.stderr)
        return 2
    questions = read_questions(args.questions)
    return run_and_report(
        lambda: run_burst_bench(
            servers=[(path.stem, path) for path in args.serve],
            questions=questions,
            bursts=bursts,
            users=args.users,
            budgets_ms=args.budgets_ms,
            requests=args.requests,
            repeats=args.repeats,
            warmup=args.warmup,
            pause_s=args.pause,
            timeout_s=args.timeout,
            log_dir=args.log_dir,
            command=command_line(argv_of(args)),
            fake_sglang=args.fake_sglang,
            secret_keys=SECRET_KEYS,
            say=lambda line: print(line, file=sys.stderr),
        ),
        text_report,
        write_burst_json,
        args.json,
    )
