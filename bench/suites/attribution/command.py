"""``ragtime bench attribution``: its options and its run: the labelled set in-process
(``labelled``), or a running server's answers (``share``) with ``--url``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    """Add ``attribution`` to ``ragtime bench``'s subcommands."""
    attribution = subparsers.add_parser(
        "attribution",
        help="citation attribution: precision and recall on a labelled set, and the share of "
        "a running server's answers that cite a passage",
        description="Without --url: MiniLM in-process on the labelled sets of "
        "bench/suites/attribution/labelled.py (built from the demo corpus), the threshold sweep "
        "and the "
        "threshold it chooses. With --url: ask a running server the questions one by one and "
        "count the answers that cite a passage by the model's labels, and at all.",
    )
    attribution.add_argument("--threshold", type=float, help="mark this one (default: shipped)")
    attribution.add_argument(
        "--seeds", type=int, nargs="+", default=[0, 1], help="labelled sets built, one a seed"
    )
    attribution.add_argument("--url", help="a running server, e.g. http://127.0.0.1:8000")
    attribution.add_argument("--key", help="its API key (default: .ragtime/demo-api-key)")
    attribution.add_argument(
        "--questions", type=Path, default=Path("demo/questions.txt"),
        help="questions the labelled answers are built for",
    )  # fmt: skip
    attribution.add_argument("--limit", type=int, default=12, help="questions asked")
    attribution.add_argument("--budget-ms", type=int, help="each question's budget")
    attribution.add_argument(
        "--save", type=Path, help="with --url: append each answer to this file as a JSON line"
    )
    attribution.add_argument(
        "--grounding",
        action="store_true",
        help="instead: `grounded`'s precision and recall at each share on the labelled answers "
        "built from demo/answers (bench/suites/attribution/grounding.py)",
    )
    attribution.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.grounding:
        from bench.suites.attribution.grounding import sweep_rows

        print("\n".join(sweep_rows()))
        return 0
    from bench.suites.attribution.labelled import sweep_report
    from bench.suites.attribution.share import citation_share, questions_of, share_report

    if args.url is None:
        print(sweep_report(args.threshold, args.seeds))
        return 0
    key = args.key or Path(".ragtime/demo-api-key").read_text().strip()
    share = citation_share(
        args.url,
        key,
        questions_of(args.questions, args.limit),
        budget_ms=args.budget_ms,
        save=args.save,
    )
    print(share_report(share))
    return 0
