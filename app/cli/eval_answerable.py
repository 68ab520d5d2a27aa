"""``ragtime eval answerable``: how well each abstention threshold separates the questions the
documents answer from those they do not, read from ``ragtime eval answers --json`` files
(``app.evaluation.calibration``). Run the answers with abstention off
(``RAGTIME_ANSWERABLE_MIN_SIMILARITY=-1``; ``--modes extract`` asks no model and takes seconds),
then sweep."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.cli.failures import CliError


def register_eval_answerable(eval_sub: Any) -> None:
    """Add ``eval answerable`` beside ``eval answers``."""
    answerable = eval_sub.add_parser(
        "answerable",
        help="sweep the abstention threshold over `eval answers --json` runs",
        description="For each least similarity on a 0.025 grid: the unanswerable questions "
        "refused, the answerable ones refused, and the precision of a refusal.",
    )
    answerable.add_argument("runs", nargs="+", type=Path, help="`eval answers --json` files")
    answerable.add_argument(
        "--from", dest="start", type=float, default=0.2, help="the lowest threshold (default: 0.2)"
    )
    answerable.add_argument(
        "--to", dest="stop", type=float, default=0.7, help="the highest threshold (default: 0.7)"
    )
    answerable.set_defaults(func=cmd_eval_answerable)


def cmd_eval_answerable(args: argparse.Namespace) -> int:
    import json

    from app.evaluation.calibration import markdown, read_runs, sweep

    try:
        weighed = read_runs(args.runs)
    except (OSError, json.JSONDecodeError) as exc:
        raise CliError(f"cannot read the runs: {exc}") from exc
    if not weighed:
        raise CliError(
            "no answer in these runs carries `evidence_similarity`: run `ragtime eval answers` "
            "against a server that reports it"
        )
    sets = sorted({w.dataset for w in weighed})
    print(f"{len(weighed)} questions of {', '.join(sets)}")
    print(markdown(sweep(weighed, start=args.start, stop=args.stop)))
    return 0
