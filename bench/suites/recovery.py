"""``ragtime bench recovery``: does the planner plan as before once a burst of other load ends?

Against a running server (``--url``), at one budget: ``--quiet`` questions on the quiet machine
record each question's plan (the set of its degradations' stage and action: the first token,
context and output savings the planner chose); then ``--burners`` processes spin on the CPU for
``--load-s`` seconds while questions keep coming (the cost model learns the slow machine); then
the burners stop and the same questions are asked again (``--after``). Reported: how many of
them plan as the quiet machine did, how many were 504s, and the generation target's decode
estimate (``GET /v1/budget/model``) at each step. The issue it measures: 43 §2 (a minute of
load left the planner pessimistic for minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness.burners import burners
from bench.harness.commands import DEMO_QUESTIONS, read_questions


def register(subparsers: Any) -> None:
    """Add ``recovery`` to ``ragtime bench``'s subcommands."""
    recovery = subparsers.add_parser(
        "recovery",
        help="plans after a burst of other load ends, against the quiet machine's",
        description="Needs a running server (ragtime serve). Spins --burners processes on "
        "this machine: run it on the server's machine.",
    )
    recovery.add_argument("--url", required=True, help="the running server's base URL")
    recovery.add_argument("--key", help="an API key with the ask scope (default: RAGTIME_API_KEY)")
    recovery.add_argument(
        "--budget-ms", type=int, default=8000, help="the budget of the questions before and after"
    )
    recovery.add_argument(
        "--load-budget-ms",
        type=int,
        default=15000,
        help="the budget of the questions during the load (long: their answers finish, and "
        "teach the cost model the slow machine)",
    )
    recovery.add_argument("--quiet", type=int, default=20, help="questions before the load")
    recovery.add_argument("--after", type=int, default=20, help="questions after the load")
    recovery.add_argument("--load-s", type=float, default=60.0, help="how long the load lasts")
    recovery.add_argument(
        "--burners", type=int, default=2, help="processes spinning on the CPU (one per core here)"
    )
    recovery.add_argument("--questions", type=Path, default=DEMO_QUESTIONS, help="one a line")
    recovery.add_argument("--json", type=Path, help="write every answer's plan here")
    recovery.set_defaults(func=run)


def _plan(report: dict[str, Any]) -> tuple[str, ...]:
    return tuple(sorted({f"{d['stage']}:{d['action']}" for d in report.get("degradations", [])}))


def run(args: argparse.Namespace) -> int:
    import httpx

    key = args.key or os.environ.get("RAGTIME_API_KEY", "")
    questions = read_questions(args.questions)
    url = args.url.rstrip("/")
    http = httpx.Client(
        timeout=httpx.Timeout(10.0, read=120.0), headers={"Authorization": f"Bearer {key}"}
    )

    def ask(question: str, budget_ms: int = args.budget_ms) -> dict[str, Any]:
        response = http.post(f"{url}/v1/ask", json={"question": question, "budget_ms": budget_ms})
        body = (
            response.json()
            if response.headers.get("content-type", "").startswith("application/json")
            else {}
        )
        return {
            "question": question,
            "status": response.status_code,
            "plan": _plan(body),
            "tokens": (body.get("usage") or {}).get("completion_tokens"),
        }

    def decode_p90() -> float | None:
        model = http.get(f"{url}/v1/budget/model").json()
        targets = list(model.get("generation", {}).values())
        return targets[0].get("decode_ms_per_token_p90") if targets else None

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    quiet = [ask(questions[i % len(questions)]) for i in range(args.quiet)]
    decode_quiet = decode_p90()
    say(f"quiet: {args.quiet} asked; decode p90 {decode_quiet} ms a token")
    loaded: list[dict[str, Any]] = []
    with burners(args.burners):
        ends = time.monotonic() + args.load_s
        while time.monotonic() < ends:
            loaded.append(ask(questions[len(loaded) % len(questions)], args.load_budget_ms))
    decode_loaded = decode_p90()
    say(f"load: {len(loaded)} asked in {args.load_s:.0f} s; decode p90 {decode_loaded}")
    after, decode_after = [], []
    for i in range(args.after):
        after.append(ask(questions[i % len(questions)]))
        decode_after.append(decode_p90())
    as_quiet = [
        a["plan"] == quiet[i % len(quiet)]["plan"] and a["status"] == 200
        for i, a in enumerate(after)
    ]
    first = next((i + 1 for i, ok in enumerate(as_quiet) if all(as_quiet[i:])), None)
    print(
        f"budget {args.budget_ms} ms ({args.load_budget_ms} ms during the load), "
        f"{args.burners} burners for {args.load_s:.0f} s, at {url}"
    )
    print(
        "| after the load | plan as quiet | 504 | all as quiet from | decode p90 ms: quiet / "
        "loaded / after 1 / after 5 / after all |"
    )
    print("| --- | --- | --- | --- | --- |")
    p90 = [
        decode_quiet,
        decode_loaded,
        decode_after[0],
        decode_after[min(4, len(after) - 1)],
        decode_after[-1],
    ]
    print(
        f"| {len(after)} questions | {sum(as_quiet)} | "
        f"{sum(a['status'] == 504 for a in after)} | "
        f"{'request ' + str(first) if first else 'never'} | "
        f"{' / '.join('–' if v is None else f'{v:.1f}' for v in p90)} |"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "quiet": quiet,
                    "loaded": loaded,
                    "after": after,
                    "decode_p90_after": decode_after,
                },
                indent=1,
            )
            + "\n"
        )
    return 0
