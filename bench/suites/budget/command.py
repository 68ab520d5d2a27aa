"""``ragtime bench budget``: its options, and which of its three modes a run is.

``--budgets``: goodput per budget (``goodput``); ``--fresh-starts``: a fresh process's first
requests (``fresh``); neither: the degradation policy on and off under injected faults
(``faults``).
"""

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
    positive_floats,
    positive_ints,
    read_questions,
    run_and_report,
)


def register(subparsers: Any) -> None:
    """Add ``budget`` to ``ragtime bench``'s subcommands."""
    budget = subparsers.add_parser(
        "budget",
        help="goodput per budget (--budgets), or the policy on and off under injected faults",
        description="With --budgets: for each CONFIG, the unconstrained p50, then for each "
        "budget (multiples of that p50) and load, what share of requests got a useful answer "
        "within budget, and what share a 504, before and after a run of cache hits "
        "(bench.suites.budget.goodput). Without: for each fault (a delay added to every rerank "
        "run, or to "
        "every generated token) start two servers from CONFIG, policy on and off, with a tiny "
        "random cross-encoder so that rerank runs; drive them alternately with the same budget "
        "at each load (closed loops of N users). Also measures the budget and tracing "
        "machinery's own cost per request, in-process. With --fresh-starts: each CONFIG's first "
        "requests after a fresh start, N starts each (bench.suites.budget.fresh).",
    )
    budget.add_argument(
        "--serve", type=Path, required=True, metavar="CONFIG", action="append",
        help="a RAGTIME_* env file to serve and measure (repeat for several)",
    )  # fmt: skip
    budget.add_argument(
        "--budget-ms", type=int, help="sent with every request (fault and fresh modes)"
    )
    budget.add_argument(
        "--budgets",
        type=positive_floats,
        metavar="X[,X...]",
        help="goodput mode: budgets as multiples of the unconstrained p50, e.g. 0.3,0.5,1,1.5",
    )
    budget.add_argument("--baseline", type=int, default=8, help="goodput: unconstrained requests")
    budget.add_argument(
        "--cache-hits", type=int, default=50, help="goodput: repeats of one question between"
    )
    budget.add_argument(
        "--repeat-share", type=float, default=0.3, help="goodput: share of repeated questions"
    )
    budget.add_argument(
        "--fake-sglang",
        metavar="SPEC",
        help="goodput: start the simulated SGLang server (bench.sglang_sim) for sglang "
        "configs, e.g. "
        "'fixed_ms=30,prefill_ms_per_token=0.05,decode_ms_per_token=10,max_running=8'",
    )
    budget.add_argument(
        "--fresh-starts",
        type=int,
        metavar="N",
        help="fresh mode: start each CONFIG afresh N times (taking turns) and send each new "
        "process, as soon as it is ready, its first requests one after another with "
        "--budget-ms; useful, 504s and latency per start and in total (bench.suites.budget.fresh)",
    )
    budget.add_argument(
        "--fresh-order",
        type=positive_ints,
        default=None,
        metavar="Q[,Q...]",
        help="fresh mode: the question numbers (1-based) each new process is asked, in order "
        "(default: 1,2,1,3,4,2,5,6,7,8)",
    )
    budget.add_argument(
        "--rerank-delay-ms", type=float, default=200.0, help="rerank fault per pair (0: not run)"
    )
    budget.add_argument(
        "--token-delay-ms", type=float, default=80.0, help="generation fault per token (0: not run)"
    )
    budget.add_argument(
        "--concurrency", type=positive_ints, default=[1, 2], metavar="N[,N...]",
        help="closed-loop users, a run for each count",
    )  # fmt: skip
    budget.add_argument("--requests", type=int, default=12, help="measured requests per cell")
    budget.add_argument("--warmup", type=int, default=1, help="uncounted requests per cell")
    budget.add_argument("--rounds", type=int, default=2, help="turns per server and load")
    budget.add_argument("--timeout", type=float, default=120.0, help="per-request limit, s")
    budget.add_argument(
        "--questions", type=Path, default=DEMO_QUESTIONS, help="one question per line"
    )
    budget.add_argument(
        "--machinery-iterations",
        type=int,
        default=5000,
        help="requests' worth of machinery timed in-process (0: skip)",
    )
    budget.add_argument(
        "--model-dir",
        type=Path,
        default=Path("bench-results/tiny-cross-encoder"),
        help="where the tiny random cross-encoder is built",
    )
    budget.add_argument(
        "--log-dir", type=Path, default=Path("bench-results/logs"), help="each server's log"
    )
    budget.add_argument("--json", type=Path, help="write the result here")
    budget.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    budget.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.harness.record import command_line
    from bench.suites.budget.faults import run_budget_bench, text_report, write_budget_json

    logging.getLogger("httpx").setLevel(logging.WARNING)
    questions = read_questions(args.questions)
    if args.fresh_starts is not None:
        return _fresh(args, questions)
    if args.budgets:
        return _goodput(args, questions)
    if args.budget_ms is None or len(args.serve) != 1:
        print("error: the fault mode needs --budget-ms and one --serve", file=sys.stderr)
        return 2
    faults = [(name, ms) for name, ms in (("rerank", args.rerank_delay_ms),
                                         ("generate", args.token_delay_ms)) if ms > 0]  # fmt: skip
    if not questions or not faults:
        print("error: no questions, or no fault to inject", file=sys.stderr)
        return 2
    return run_and_report(
        lambda: run_budget_bench(
            config_path=args.serve[0],
            questions=questions,
            budget_ms=args.budget_ms,
            faults=faults,
            users=args.concurrency,
            requests=args.requests,
            warmup=args.warmup,
            rounds=args.rounds,
            timeout_s=args.timeout,
            model_dir=args.model_dir,
            log_dir=args.log_dir,
            machinery_iterations=args.machinery_iterations,
            command=command_line(argv_of(args)),
            show_progress=not args.no_progress,
        ),
        text_report,
        write_budget_json,
        args.json,
    )


def _goodput(args: argparse.Namespace, questions: list[str]) -> int:
    from bench.harness.record import command_line, write_json
    from bench.suites.budget.goodput import run_goodput, text_report

    return run_and_report(
        lambda: run_goodput(
            servers=[(path.stem, path) for path in args.serve],
            questions=questions,
            multiples=args.budgets,
            users=args.concurrency,
            requests=args.requests,
            baseline=args.baseline,
            cache_hits=args.cache_hits,
            repeat_share=args.repeat_share,
            timeout_s=args.timeout,
            log_dir=args.log_dir,
            command=command_line(argv_of(args)),
            fake_sglang=args.fake_sglang,
            show_progress=not args.no_progress,
        ),
        text_report,
        write_json,
        args.json,
    )


def _fresh(args: argparse.Namespace, questions: list[str]) -> int:
    from bench.harness.record import command_line
    from bench.suites.budget.fresh import FRESH_ORDER, run_fresh, text_report, write_fresh_json

    if args.budget_ms is None or args.budgets or args.fresh_starts < 1:
        print("error: the fresh mode needs --budget-ms and --fresh-starts >= 1, and no "
              "--budgets", file=sys.stderr)  # fmt: skip
        return 2
    return run_and_report(
        lambda: run_fresh(
            servers=[(path.stem, path) for path in args.serve],
            questions=questions,
            order=args.fresh_order or FRESH_ORDER,
            budget_ms=args.budget_ms,
            starts=args.fresh_starts,
            timeout_s=args.timeout,
            log_dir=args.log_dir,
            command=command_line(argv_of(args)),
            fake_sglang=args.fake_sglang,
            secret_keys=SECRET_KEYS,
            show_progress=not args.no_progress,
        ),
        text_report,
        write_fresh_json,
        args.json,
    )
