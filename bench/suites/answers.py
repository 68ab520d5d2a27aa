"""``ragtime bench answers``: ``ragtime eval answers`` against a server it starts from a bench
config (``--serve``, e.g. ``benchmarks/cpu-default.env``) on a free port, stopped when the set
has been asked; with ``--url`` instead, against a running one, as ``eval answers`` itself.

The options and the run are ``eval answers``' own (``app.cli.eval_answers``): a run of the
labelled set in each answer mode at each budget and TTFT target, scored by
``app.evaluation.scoring``. The key is ``--key``, else the config's (``RAGTIME_API_KEY`` or the
demo key of its data dir); its data dir receives the set's collection. ``ragtime bench section
--answers`` writes the tables into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.cli.eval_answers import add_eval_answers_arguments, cmd_eval_answers
from app.cli.failures import CliError


def register(subparsers: Any) -> None:
    """Add ``answers`` to ``ragtime bench``'s subcommands."""
    parser = subparsers.add_parser(
        "answers",
        help="`ragtime eval answers` against a server started from a config (--serve)",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "--serve", type=Path, metavar="CONFIG", help="start ragtime with this config file"
    )
    parser.add_argument("--log-dir", type=Path, help="where a started server writes its log")
    add_eval_answers_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.serve:
        return cmd_eval_answers(args)
    if args.url:
        raise CliError("give --serve or --url, not both")
    from bench.harness.serve import ServerFailed, config_key, ragtime_server, read_config

    try:
        config = read_config(args.serve)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    try:
        with ragtime_server(f"answers-{args.serve.stem}", config, log_dir=args.log_dir) as server:
            args.url = server.url
            args.key = args.key or config_key(config)
            return cmd_eval_answers(args)
    except ServerFailed as exc:
        raise CliError(str(exc)) from exc
