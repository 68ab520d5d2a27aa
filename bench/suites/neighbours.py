"""``ragtime bench neighbours``: answers one at a time while other processes keep the CPU busy.

ragtime's CPU default runs where people work: beside a browser, a build, another service. This
bench starts a server from a config (``--serve``, e.g. ``benchmarks/cpu-default.env``) or drives
a running one (``--url``), asks ``--warm`` questions on the quiet machine (the cost model learns
it), then starts ``--burners`` processes spinning on the CPU at normal priority
(``while True: pass``) and asks ``--questions`` streamed questions one after another at each
budget of ``--budgets``, then stops the burners and asks the same number at each budget again,
quiet. Each row: answers useful within budget, whole (ended by the model or its token cap,
not the deadline), cut by the deadline, 504s after admission, refusals at the door, plans the
budget degraded, and the first token and end-to-end times as the client saw them. The issue it
measures: 56 (two CPU hogs turned a 30 s budget into 504s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from app.cli.eval_answers import without_key
from bench.harness.burners import burners
from bench.harness.client import RequestRecord, Target, ask_stream, make_client
from bench.harness.commands import (
    DEMO_QUESTIONS,
    argv_of,
    positive_ints,
    read_questions,
    run_and_report,
)
from bench.harness.outcomes import is_refused, is_useful
from bench.harness.record import command_line

#: Finish reasons of an answer the deadline cut (``tracing.budget.serving``'s).
CUT = ("deadline", "yielded")


def register(subparsers: Any) -> None:
    """Add ``neighbours`` to ``ragtime bench``'s subcommands."""
    parser = subparsers.add_parser(
        "neighbours",
        help="answers one at a time beside CPU-bound processes, then quiet",
        description=__doc__.split("\n\n")[1],
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--serve", type=Path, help="start ragtime with this config file")
    where.add_argument("--url", help="a running server's base URL (on this machine)")
    parser.add_argument("--key", help="API key (default: the config's, or RAGTIME_API_KEY)")
    parser.add_argument("--budgets", type=positive_ints, default=[30000, 6000], help="ms")
    parser.add_argument("--burners", type=int, default=2, help="CPU-bound processes beside it")
    parser.add_argument("--questions", type=int, default=20, help="asked at each budget")
    parser.add_argument("--warm", type=int, default=5, help="quiet questions first, not counted")
    parser.add_argument("--question-file", type=Path, default=DEMO_QUESTIONS, help="one a line")
    parser.add_argument("--log-dir", type=Path, help="where a started server writes its log")
    parser.add_argument("--json", type=Path, help="write every request's record here")
    parser.set_defaults(func=run)


def summarise(condition: str, budget_ms: int, records: list[RequestRecord]) -> dict[str, Any]:
    """One row: how the answers at one budget and condition fared."""
    ok = [r for r in records if r.outcome == "ok" and r.status == 200]
    ttft = [r.ttft_ms for r in ok if r.ttft_ms is not None]
    e2e = sorted(r.e2e_ms for r in records if r.e2e_ms is not None)
    return {
        "condition": condition,
        "budget_ms": budget_ms,
        "asked": len(records),
        "useful": sum(is_useful(r) for r in records),
        "whole": sum(is_useful(r) and r.finish_reason not in CUT for r in records),
        "cut": sum(r.finish_reason in CUT for r in ok),
        "late_504": sum(is_refused(r) and r.status not in (429, 503) for r in records),
        "refused_at_door": sum(r.status in (429, 503) for r in records),
        "over_budget": sum(r.e2e_ms is not None and r.e2e_ms > budget_ms for r in records),
        "degraded": sum(bool(r.degradations) for r in ok),
        "ttft_p50_ms": statistics.median(ttft) if ttft else None,
        "e2e_p50_ms": statistics.median(e2e) if e2e else None,
        "e2e_max_ms": e2e[-1] if e2e else None,
        "completion_tokens_p50": statistics.median(
            [r.completion_tokens for r in ok if r.completion_tokens is not None] or [0]
        ),
    }


async def ask_each(
    target: Target, questions: list[str], budget_ms: int, count: int, offset: int
) -> list[RequestRecord]:
    """``count`` questions, one after another, each at ``budget_ms``."""
    records = []
    timeout_s = budget_ms / 1000.0 + 60.0
    async with make_client(max_connections=2, timeout_s=timeout_s) as client:
        for i in range(count):
            question = questions[(offset + i) % len(questions)]
            record = await ask_stream(
                client, target, question, index=i, budget_ms=budget_ms, timeout_s=timeout_s
            )
            records.append(record)
    return records


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The whole run: warm-up, each budget beside the burners, each budget quiet."""
    from bench.harness.serve import config_key, ragtime_server, read_config

    questions = read_questions(args.question_file)
    config = read_config(args.serve) if args.serve else {}
    server = ragtime_server("neighbours", config, log_dir=args.log_dir) if args.serve else None
    key = args.key or config_key(config) or ""
    rows, records = [], []
    with server or nullcontext():
        url = server.url if server else args.url.rstrip("/")
        target = Target("ragtime", url, key)
        asyncio.run(ask_each(target, questions, max(args.budgets), args.warm, 0))
        offset = args.warm
        for condition, load in (("neighbours", args.burners), ("quiet", 0)):
            with burners(load):
                for budget_ms in args.budgets:
                    asked = asyncio.run(
                        ask_each(target, questions, budget_ms, args.questions, offset)
                    )
                    offset += args.questions
                    rows.append(summarise(condition, budget_ms, asked))
                    records += [
                        {"condition": condition, **r.model_dump(mode="json")} for r in asked
                    ]
                    print(f"{condition}, {budget_ms} ms: done", file=sys.stderr, flush=True)
    return {
        "command": command_line(without_key(argv_of(args))),
        "burners": args.burners,
        "rows": rows,
        "records": records,
    }


def report(result: dict[str, Any]) -> str:
    """The table BENCHMARKS.md shows."""

    def ms(value: float | None) -> str:
        return "–" if value is None else f"{value:,.0f}"

    lines = [
        f"`{result['command']}` (one question at a time; the neighbours: "
        f"{result['burners']} processes spinning at normal priority)",
        "",
    ]
    header = [
        "machine",
        "budget",
        "asked",
        "useful in budget",
        "whole",
        "cut by deadline",
        "504 after admission",
        "refused at door",
        "over budget",
        "plans degraded",
        "first token p50 ms",
        "end to end p50 / max ms",
        "tokens p50",
    ]
    body = [
        [
            row["condition"],
            f"{row['budget_ms'] / 1000:g} s",
            str(row["asked"]),
            str(row["useful"]),
            str(row["whole"]),
            str(row["cut"]),
            str(row["late_504"]),
            str(row["refused_at_door"]),
            str(row["over_budget"]),
            str(row["degraded"]),
            ms(row["ttft_p50_ms"]),
            f"{ms(row['e2e_p50_ms'])} / {ms(row['e2e_max_ms'])}",
            f"{row['completion_tokens_p50']:.0f}",
        ]
        for row in result["rows"]
    ]
    rows = [header, ["---"] * len(header), *body]
    return "\n".join([*lines, *("| " + " | ".join(row) + " |" for row in rows)])


def write(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")


def run(args: argparse.Namespace) -> int:
    return run_and_report(lambda: measure(args), report, write, args.json)
