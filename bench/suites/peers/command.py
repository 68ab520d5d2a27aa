"""``ragtime bench peers``: its options and its run (``measure`` runs, ``results`` sums up)."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys
import tempfile
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
from bench.suites.ceiling.command import add_sweep_options

#: The sweep's rates: where ragtime's, the floor's and Haystack's ceilings lie on 2 cores.
DEFAULT_RATES = "10,20,30,40,50,60,80,100,125,150,200,250,300"


def register(subparsers: Any) -> None:
    """Add ``peers`` to ``ragtime bench``'s subcommands."""
    peers = subparsers.add_parser(
        "peers",
        help="ragtime beside the same-work floor and a Haystack pipeline: first token, CPU per "
        "request and ceilings, in one run with the same clients",
        description="Starts ragtime (CONFIG, the null backend by default), the same-work floor "
        "(python -m bench.harness.floor --same-work: ragtime's inherent work over CONFIG's data "
        "dir, none of its machinery; with a null backend only) and the Haystack peer (python -m "
        "bench.peers.haystack_app: the tutorials' hybrid RAG pipeline over the demo corpus, with "
        "the same MiniLM and SmolLM2 files; needs the bench-peers extra: pip install -e "
        "'.[bench-peers]'). Then, --runs times: each closed loop of --users by the bench's own "
        "client (TTFT, e2e, req/s, server CPU per request), and a sweep of --rates by wrk (each "
        "target's ceiling, as `ragtime bench ceiling` finds one). Every request asks a question "
        "never asked before. Prints the medians and ranges across runs, and ragtime's ratios to "
        "the others.",
    )
    peers.add_argument(
        "--serve", type=Path, default=Path("benchmarks/null.env"), metavar="CONFIG",
        help="the RAGTIME_* env file ragtime serves with (its data dir holds the demo collection)",
    )  # fmt: skip
    peers.add_argument("--runs", type=int, default=3, help="runs, each with every load")
    peers.add_argument(
        "--users", type=positive_ints, default="1,4", metavar="N[,N...]",
        help="closed loops of N users, each in turn",
    )  # fmt: skip
    peers.add_argument("--requests", type=int, default=200, help="measured requests per loop")
    peers.add_argument("--warmup", type=int, default=10, help="uncounted requests first")
    add_sweep_options(peers, rates=DEFAULT_RATES, min_requests=100)
    peers.add_argument("--no-sweep", action="store_true", help="closed loops only, no wrk")
    peers.add_argument("--no-peer", action="store_true", help="ragtime and the floor only")
    peers.add_argument(
        "--peer-python", metavar="PYTHON",
        help="the interpreter that runs the peer, with the bench-peers extra (default: the one "
        "running ragtime)",
    )  # fmt: skip
    peers.add_argument(
        "--peer-generator", choices=("null", "llama.cpp"),
        help="the peer's generator (default: null when CONFIG's backend is, else SmolLM2)",
    )  # fmt: skip
    peers.add_argument(
        "--index-cache", type=Path, default=Path("bench-results/peers"),
        help="where the peer keeps its indexed demo corpus between starts",
    )  # fmt: skip
    peers.add_argument(
        "--questions", type=Path, default=DEMO_QUESTIONS,
        help="one question per line: the bases of the fresh ones",
    )  # fmt: skip
    peers.add_argument(
        "--log-dir", type=Path, default=Path("bench-results/logs"), help="each server's log"
    )
    peers.add_argument("--json", type=Path, help="write the result here")
    peers.set_defaults(func=run)


def _peer(args: argparse.Namespace, null: bool) -> Any:
    from bench.suites.peers.measure import PeerSpec

    if args.no_peer:
        return None
    python = args.peer_python or sys.executable
    if python == sys.executable and importlib.util.find_spec("haystack") is None:
        raise ValueError(
            "the bench-peers extra is not installed (no haystack-ai): pip install -e "
            "'.[bench-peers]', pass --peer-python with one that has it, or --no-peer"
        )
    generator = args.peer_generator or ("null" if null else "llama.cpp")
    return PeerSpec(python, generator, args.index_cache)


def run(args: argparse.Namespace) -> int:
    from bench.harness.record import command_line
    from bench.harness.serve import read_config
    from bench.suites.ceiling.wrk import WrkMissing, wrk_binary
    from bench.suites.peers.measure import run_peers_bench
    from bench.suites.peers.results import text_report, write_peers_json

    logging.getLogger("httpx").setLevel(logging.WARNING)
    rates = [] if args.no_sweep else args.rates
    if rates:
        try:
            wrk_binary()
        except WrkMissing as exc:
            print(f"error: {exc} (or pass --no-sweep)", file=sys.stderr)
            return 1
    if args.runs < 1 or args.requests < 1 or args.warmup < 0 or args.patience < 1:
        print("error: --runs, --requests and --patience must be positive", file=sys.stderr)
        return 2
    try:
        null = read_config(args.serve).get("RAGTIME_GENERATION_BACKEND") == "null"
        peer = _peer(args, null)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    questions = read_questions(args.questions)
    with tempfile.TemporaryDirectory(prefix="ragtime-peers-") as work:
        return run_and_report(
            lambda: run_peers_bench(
                config_path=args.serve,
                questions=questions,
                users=args.users,
                requests=args.requests,
                warmup=args.warmup,
                runs=args.runs,
                rates=rates,
                seconds=args.seconds,
                min_requests=args.min_requests,
                patience=args.patience,
                pause_s=args.pause,
                peer=peer,
                log_dir=args.log_dir,
                work_dir=Path(work),
                command=command_line(argv_of(args)),
                secret_keys=SECRET_KEYS,
                say=lambda line: print(line, file=sys.stderr, flush=True),
            ),
            text_report,
            write_peers_json,
            args.json,
        )
