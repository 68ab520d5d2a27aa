"""``ragtime bench ceiling``: its options and its run (``measure`` runs, ``results`` judges)."""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.harness.commands import (
    DEMO_QUESTIONS,
    SECRET_KEYS,
    argv_of,
    positive_floats,
    read_questions,
    run_and_report,
)

#: Rates of the sweep: fine steps where ragtime's ceiling lies on 2 cores, wider ones for the
#: floor's; the lowest, the rule's reference, is the low rate of the TTFT pairs.
DEFAULT_RATES = "10,20,30,40,50,60,80,100,125,150,200,250,300,400,500,600,800,1000,1200"


def add_sweep_options(parser: Any, *, rates: str, min_requests: int) -> None:
    """The options of a wrk sweep (``measure.sweep``), ``rates`` and ``min_requests`` the
    command's defaults: ``bench ceiling``'s and ``bench peers``'."""
    parser.add_argument(
        "--rates", type=positive_floats, default=rates, metavar="R,R,...",
        help="the sweep's rates, requests per second (Poisson arrivals)",
    )  # fmt: skip
    parser.add_argument(
        "--seconds", type=float, default=3.0, help="measured seconds per rate, at least"
    )
    parser.add_argument(
        "--min-requests", type=int, default=min_requests,
        help="requests per rate, at least (it lengthens the lowest rates)",
    )  # fmt: skip
    parser.add_argument(
        "--patience", type=int, default=2,
        help="consecutive failing rates after which a target leaves the sweep",
    )  # fmt: skip
    parser.add_argument(
        "--pause", type=float, default=0.5, help="seconds idle between two wrk phases"
    )


def register(subparsers: Any) -> None:
    """Add ``ceiling`` to ``ragtime bench``'s subcommands."""
    ceiling = subparsers.add_parser(
        "ceiling",
        help="ragtime's ceiling as a share of the bare FastAPI floor's, by a compiled load "
        "generator (wrk), and its TTFT p50 over the floor's",
        description="Starts the floor and ragtime (CONFIG, the null backend by default, its "
        "default workers) once each; then, --runs times: both at --low-rate by the bench's own "
        "client (TTFT p50, questions never asked before, then repeats), and both swept over "
        "--rates with wrk, side by side. A ceiling is the highest rate whose p99 stayed under "
        "twice its value at the lowest rate, with at most 1% errors. Needs wrk "
        "(apt-get install wrk).",
    )
    ceiling.add_argument(
        "--serve", type=Path, default=Path("benchmarks/null.env"), metavar="CONFIG",
        help="the RAGTIME_* env file ragtime serves with",
    )  # fmt: skip
    ceiling.add_argument("--runs", type=int, default=3, help="runs, each with both sweeps")
    add_sweep_options(ceiling, rates=DEFAULT_RATES, min_requests=200)
    ceiling.add_argument(
        "--low-rate", type=float, default=10.0, help="the rate of the TTFT p50 pairs, req/s"
    )
    ceiling.add_argument(
        "--low-requests", type=int, default=100,
        help="requests per target in each TTFT p50 pair",
    )  # fmt: skip
    ceiling.add_argument(
        "--questions", type=Path, default=DEMO_QUESTIONS,
        help="one question per line: the sweep's, in turn, and the bases of the fresh ones",
    )  # fmt: skip
    ceiling.add_argument(
        "--floor-tokens", type=int, help="tokens the floor streams (default: CONFIG's max output)"
    )
    ceiling.add_argument(
        "--log-dir", type=Path, default=Path("bench-results/logs"), help="each server's log"
    )
    ceiling.add_argument(
        "--profile", type=Path, metavar="DIR",
        help="sample ragtime with py-spy while it serves, into DIR/ragtime.txt",
    )  # fmt: skip
    ceiling.add_argument("--json", type=Path, help="write the result here")
    ceiling.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.harness.record import command_line
    from bench.suites.ceiling.measure import run_ceiling_bench
    from bench.suites.ceiling.results import text_report, write_ceiling_json
    from bench.suites.ceiling.wrk import WrkMissing, wrk_binary

    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        wrk_binary()
    except WrkMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.runs < 1 or args.patience < 1 or args.seconds <= 0 or args.low_requests < 1:
        print("error: --runs, --patience, --seconds and --low-requests must be positive",
              file=sys.stderr)  # fmt: skip
        return 2
    questions = read_questions(args.questions)
    with tempfile.TemporaryDirectory(prefix="ragtime-ceiling-") as work:
        return run_and_report(
            lambda: run_ceiling_bench(
                config_path=args.serve,
                questions=questions,
                rates=args.rates,
                runs=args.runs,
                seconds=args.seconds,
                min_requests=args.min_requests,
                low_rate=args.low_rate,
                low_requests=args.low_requests,
                patience=args.patience,
                pause_s=args.pause,
                floor_tokens=args.floor_tokens,
                log_dir=args.log_dir,
                work_dir=Path(work),
                profile_dir=args.profile,
                command=command_line(argv_of(args)),
                secret_keys=SECRET_KEYS,
                say=lambda line: print(line, file=sys.stderr, flush=True),
            ),
            text_report,
            write_ceiling_json,
            args.json,
        )
