"""``ragtime bench overload``: its options and its run (``runs`` drives the servers,
``results`` and ``report`` judge)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.harness.commands import DEMO_QUESTIONS, argv_of, read_questions, run_and_report

#: The engine of issue 44's runs: GPU-like timings (TTFT 30 ms, 10 ms a token, answers of 48
#: tokens) and a running batch of 4, so that twice its capacity stays within what ragtime's own
#: stages can serve on 2 cores.
DEFAULT_ENGINE = (
    "fixed_ms=30,prefill_ms_per_token=0.05,decode_ms_per_token=10,max_running=4,natural_tokens=48"
)
RUNS = ("slowdown", "priority")


def register(subparsers: Any) -> None:
    """Add ``overload`` to ``ragtime bench``'s subcommands."""
    p = subparsers.add_parser(
        "overload",
        help="goodput at twice the engine's capacity, a slowdown without notice, and mixed "
        "budgets with the engine's priority scheduling off and on (issue 44)",
        description="Against ragtime in front of the simulated SGLang engine (bench/sglang_sim): "
        "the capacity (a closed loop of as many users as the engine has slots), open-loop "
        "arrivals at --load times it, the same with the engine slowing down --slow-factor "
        "times a third of the way in, and arrivals at --mixed-load times it with --tight-ms "
        "and --loose-ms budgets, priority scheduling off then on.",
    )
    p.add_argument("--serve", type=Path, required=True, metavar="CONFIG",
                   help="a RAGTIME_* env file generating with SGLang")  # fmt: skip
    p.add_argument("--fake-sglang", default=DEFAULT_ENGINE, metavar="SPEC",
                   help="the simulated engine, as in `bench load`")  # fmt: skip
    p.add_argument("--runs", default=",".join(RUNS),
                   help=f"which runs besides capacity and overload: any of {', '.join(RUNS)}, "
                   "or none")  # fmt: skip
    p.add_argument("--load", type=float, default=2.0, help="the overload, times the capacity")
    p.add_argument("--budget-ms", type=int, default=3000, help="the overload runs' budget")
    p.add_argument("--duration", type=float, default=30.0, help="seconds of arrivals per run")
    p.add_argument("--capacity-requests", type=int, default=48,
                   help="requests of the closed loop that measures the capacity")  # fmt: skip
    p.add_argument("--slow-factor", type=float, default=3.0, help="the slowdown")
    p.add_argument("--mixed-load", type=float, default=1.5,
                   help="the mixed-budget runs' load, times the capacity")  # fmt: skip
    p.add_argument("--tight-ms", type=int, default=700, help="the tight questions' budget")
    p.add_argument("--loose-ms", type=int, default=5000, help="the loose questions' budget")
    p.add_argument("--tight-share", type=float, default=0.5, help="the share of tight questions")
    p.add_argument("--warmup", type=int, default=8, help="uncounted questions first, per server")
    p.add_argument("--timeout", type=float, default=30.0, help="per-request limit, s")
    p.add_argument("--seed", type=int, default=0, help="of the arrivals and the budgets")
    p.add_argument("--questions", type=Path, default=DEMO_QUESTIONS, help="one question per line")
    p.add_argument("--log-dir", type=Path, default=Path("bench-results/logs"),
                   help="each server's log")  # fmt: skip
    p.add_argument("--json", type=Path, help="write the result here")
    p.set_defaults(func=run)


def slots_of(spec: str) -> int:
    """The engine's running batch, from its spec (64 unless it says)."""
    for part in spec.split(","):
        name, _, value = part.partition("=")
        if name.strip() == "max_running":
            return int(value)
    return 64


def run(args: argparse.Namespace) -> int:
    from bench.harness.record import command_line, write_json
    from bench.suites.overload.report import text_report
    from bench.suites.overload.runs import Plan, run_overload_bench

    runs = frozenset(r for r in args.runs.split(",") if r and r != "none")
    if unknown := runs - set(RUNS):
        print(f"error: unknown run {sorted(unknown)[0]!r} (expected {', '.join(RUNS)})",
              file=sys.stderr)  # fmt: skip
        return 2
    questions = read_questions(args.questions)
    if not questions:
        print(f"error: no questions in {args.questions}", file=sys.stderr)
        return 1
    plan = Plan(
        config=args.serve, engine=args.fake_sglang, slots=slots_of(args.fake_sglang),
        questions=questions, runs=runs, capacity_requests=args.capacity_requests,
        load=args.load, budget_ms=args.budget_ms, duration_s=args.duration,
        slow_factor=args.slow_factor, mixed_load=args.mixed_load, tight_ms=args.tight_ms,
        loose_ms=args.loose_ms, tight_share=args.tight_share, warmup=args.warmup,
        timeout_s=args.timeout, seed=args.seed, log_dir=args.log_dir,
    )  # fmt: skip
    command = command_line(argv_of(args))
    return run_and_report(
        lambda: run_overload_bench(plan, command=command, say=lambda t: print(t, file=sys.stderr)),
        text_report,
        write_json,
        args.json,
    )
