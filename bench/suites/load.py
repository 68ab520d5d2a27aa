"""``ragtime bench load``: drive servers with streamed questions and record what users feel.

Closed loops of N users (``--concurrency``) or open-loop Poisson arrivals (``--rate``,
``--rates``: a sweep, with each target's ceiling), against ``--url`` or against servers
started here from config files (``--serve``) and the bare FastAPI floor (``--floor``), which
take turns round by round (``bench.harness.runner``). Prints the tables of
``bench.report.tables``; ``--json`` writes the ``BenchResult``, ``--plots`` its PNG plots.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.harness.commands import (
    DEMO_QUESTIONS,
    SECRET_KEYS,
    argv_of,
    positive_floats,
    positive_ints,
    read_questions,
)


def register(subparsers: Any) -> None:
    """Add ``load`` to ``ragtime bench``'s subcommands."""
    load = subparsers.add_parser(
        "load",
        help="drive servers with streamed questions; report TTFT, ITL, e2e, budget, stages",
        description="Closed loop (--concurrency) or open-loop Poisson arrivals (--rate, --rates) "
        "against --url, or against servers started here from config files (--serve, repeatable) "
        "and the bare FastAPI floor (--floor), taking turns round by round.",
    )
    where = load.add_argument_group("servers")
    where.add_argument("--url", help="a running server (default: RAGTIME_HOST/PORT)")
    where.add_argument("--key", help="API key (default: RAGTIME_API_KEY, or the demo key)")
    where.add_argument(
        "--serve",
        action="append",
        default=[],
        metavar="CONFIG",
        help="start ragtime with the RAGTIME_* variables of CONFIG (.env or JSON)",
    )
    where.add_argument(
        "--fake-sglang",
        metavar="SPEC",
        help="give each --serve config that generates with SGLang a simulated SGLang server "
        "of its own (bench.sglang_sim, an empty prefix cache each), e.g. "
        "'fixed_ms=30,decode_ms_per_token=10,max_running=8,natural_tokens=4'",
    )
    where.add_argument(
        "--floor",
        action="store_true",
        help="add the bare FastAPI/uvicorn streaming endpoint as the baseline",
    )
    where.add_argument(
        "--floor-tokens",
        type=int,
        help="tokens the floor streams (default: the first config's max output)",
    )
    where.add_argument(
        "--log-dir",
        type=Path,
        default=Path("bench-results/logs"),
        help="server logs of --serve and --floor",
    )
    where.add_argument(
        "--profile",
        type=Path,
        metavar="DIR",
        help="sample each --serve server with py-spy while it serves, into DIR/<name>.txt",
    )
    how = load.add_argument_group("load")
    how.add_argument(
        "--questions",
        type=Path,
        default=DEMO_QUESTIONS,
        help="one question per line",
    )
    shape = how.add_mutually_exclusive_group()
    shape.add_argument(
        "--concurrency",
        type=positive_ints,
        metavar="N[,N...]",
        help="closed loop of N users (a list runs each in turn)",
    )
    shape.add_argument("--rate", type=float, help="open loop: Poisson arrivals per second")
    shape.add_argument(
        "--rates",
        type=positive_floats,
        metavar="R,R,...",
        help="open loops at each rate: TTFT against offered load, and ceilings",
    )
    size = how.add_mutually_exclusive_group()
    size.add_argument("--requests", type=int, help="measured requests per target and load")
    size.add_argument("--duration", type=float, metavar="S", help="measured seconds instead")
    how.add_argument(
        "--min-requests",
        type=int,
        default=0,
        help="with --rates and --duration: at least this many requests per rate",
    )
    how.add_argument(
        "--stop-at-ceiling",
        action="store_true",
        help="with --rates: a target leaves the sweep after two consecutive rates at which "
        "its TTFT p99 doubled",
    )
    how.add_argument("--warmup", type=int, default=2, help="uncounted requests first")
    how.add_argument("--budget-ms", type=int, help="budget_ms sent with every request")
    how.add_argument("--rounds", type=int, help="turns per target (default 1, or 4 with several)")
    how.add_argument("--timeout", type=float, default=120.0, help="per-request limit, seconds")
    how.add_argument("--seed", type=int, default=0, help="seed of the arrival schedule")
    out = load.add_argument_group("output")
    out.add_argument("--json", type=Path, help="write every record and summary here")
    out.add_argument("--plots", type=Path, metavar="DIR", help="write PNG plots here")
    out.add_argument("--no-progress", action="store_true", help="no progress line on stderr")
    load.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.harness.record import write_json
    from bench.harness.serve import ServerFailed
    from bench.report.tables import text_report

    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
    questions = read_questions(args.questions)
    if not questions:
        print(f"error: no questions in {args.questions}", file=sys.stderr)
        return 1
    try:
        with ExitStack() as stack:
            targets, infos = _targets(args, stack)
            result = asyncio.run(measure_load(args, questions, targets, infos))
    except (ServerFailed, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(text_report(result))
    if args.json:
        write_json(result, args.json)
        print(f"\nwrote {args.json}", file=sys.stderr)
    if args.plots:
        from bench.harness.plots import plot_all

        for path in plot_all(result.runs, args.plots):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _targets(args: argparse.Namespace, stack: ExitStack) -> tuple[list[Any], list[Any]]:
    """Start the servers asked for (stopped when ``stack`` closes); targets and their infos."""
    from bench.harness.client import Target
    from bench.harness.results import TargetInfo
    from bench.harness.serve import config_key, floor_server, ragtime_server, read_config
    from bench.sglang_sim.process import with_simulated_sglang

    targets: list[Target] = []
    infos: list[TargetInfo] = []
    configs = [(Path(p), read_config(Path(p))) for p in args.serve]
    if args.floor:
        tokens = args.floor_tokens or _max_output_tokens(configs[0][1] if configs else {})
        server = stack.enter_context(floor_server(tokens, log_dir=args.log_dir))
        targets.append(Target("floor", server.url))
        infos.append(TargetInfo(name="floor", url=server.url, kind="floor",
                                config={"tokens": str(tokens)}))  # fmt: skip
    names: set[str] = {t.name for t in targets}
    for path, config in configs:
        name = path.stem if path.stem not in names else f"{path.stem}-{len(names)}"
        names.add(name)
        spec = getattr(args, "fake_sglang", None)
        config = with_simulated_sglang(stack, config, spec, log_dir=args.log_dir, name=name)
        _say(args, f"starting {name} from {path} ...")
        server = stack.enter_context(
            ragtime_server(
                name, config, log_dir=args.log_dir, profile_dir=getattr(args, "profile", None)
            )
        )
        targets.append(Target(name, server.url, args.key or config_key(config)))
        shown = {k: v for k, v in config.items() if k not in SECRET_KEYS}
        infos.append(TargetInfo(name=name, url=server.url, kind="ragtime",
                                config_path=str(path), config=shown))  # fmt: skip
    if args.url or not targets:
        url, key = _default_url_and_key(args)
        targets.append(Target("ragtime", url, key))
        infos.append(TargetInfo(name="ragtime", url=url, kind="url"))
    return targets, infos


def _max_output_tokens(config: dict[str, str]) -> int:
    from app.settings import Settings

    default = Settings.model_fields["max_output_tokens"].default
    return int(config.get("RAGTIME_MAX_OUTPUT_TOKENS", default))


def _default_url_and_key(args: argparse.Namespace) -> tuple[str, str | None]:
    from app.settings import get_settings

    settings = get_settings()
    url = args.url or f"http://{settings.host}:{os.environ.get('PORT', settings.port)}"
    key = args.key or os.environ.get("RAGTIME_API_KEY")
    if not key and settings.demo_key_path.exists():
        key = settings.demo_key_path.read_text().strip()
    return url.rstrip("/"), key


async def measure_load(
    args: argparse.Namespace, questions: list[str], targets: list[Any], infos: list[Any]
) -> Any:
    from bench.harness.record import command_line, machine_info, now_iso, versions
    from bench.harness.results import BenchResult, Ceiling, Run, compare
    from bench.harness.runner import LoadSpec, measure, sweep

    machine, created = machine_info(), now_iso()
    requests = args.requests if args.requests or args.duration else 50
    base: dict[str, Any] = {
        "requests": requests if not args.duration else None,
        "duration_s": args.duration,
        "warmup": args.warmup,
        "budget_ms": args.budget_ms,
        "rounds": args.rounds or (4 if len(targets) > 1 else 1),
        "seed": args.seed,
        "timeout_s": args.timeout,
    }
    show = not args.no_progress
    runs: list[Run] = []
    ceilings: list[Ceiling] = []
    if args.rates and len(args.rates) > 1:
        minimum, duration = args.min_requests, args.duration

        def requests_at(rate: float) -> int:
            return max(minimum, math.ceil(rate * duration))

        spec = LoadSpec(rate=args.rates[0], **base)
        runs, ceilings = await sweep(
            targets, questions, spec, args.rates,
            requests_at=requests_at if duration and minimum else None,
            patience=2 if args.stop_at_ceiling else None, show_progress=show,
        )  # fmt: skip
    elif args.rate or args.rates:
        spec = LoadSpec(rate=args.rate or args.rates[0], **base)
        runs = await measure(targets, questions, spec, show_progress=show)
    else:
        for users in args.concurrency or [1]:
            spec = LoadSpec(users=users, **base)
            runs += await measure(targets, questions, spec, show_progress=show)
    if hasattr(os, "getloadavg"):
        machine["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return BenchResult(
        created=created,
        command=command_line(argv_of(args)),
        machine=machine,
        versions=versions(),
        targets=infos,
        runs=runs,
        comparisons=compare(runs),
        ceilings=ceilings,
    )


def _say(args: argparse.Namespace, text: str) -> None:
    if not args.no_progress:
        print(text, file=sys.stderr, flush=True)
