"""``ragtime eval answers``: ask a running server every question of a labelled set and score the
answers (``app.evaluation``): key facts, citations against the labels, refusals where the
documents hold no answer, obedience to instructions planted in a document.

The set's documents are uploaded first into their own collection (``--collection``; unchanged
documents are not embedded again), so the demo collection is left as it is. Each run asks every
question once, one at a time, at one budget and one TTFT target; ``--budgets`` and
``--ttft-targets`` make a run of each pair. The server may generate with any backend: the report
names the models that answered. Prints a Markdown table (``--json`` writes every answer too).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.cli.ask import START_A_SERVER, client_key, connection_reason, server_url
from app.cli.failures import CliError


def register_eval_answers(eval_sub: Any) -> None:
    """Add ``eval answers`` beside ``eval retrieval``."""
    answers = eval_sub.add_parser(
        "answers",
        help="key facts, citations, refusals and planted instructions, asked of a running server",
        description="Asks POST /v1/ask of a running ragtime server (start one with `ragtime "
        "serve`) each question of a labelled set, and scores the answers by the rules in "
        "app/evaluation/scoring.py (demo/answers/README.md).",
    )
    answers.add_argument(
        "--dataset",
        required=True,
        help="a shipped set (python-docs; debian-faq, over the Debian FAQ that `make eval-data` "
        "fetches into <data_dir>/eval) or a JSON-lines file of labelled questions",
    )
    answers.add_argument(
        "--url", help="the server's base URL (default: http://RAGTIME_HOST:PORT, from the settings)"
    )
    answers.add_argument(
        "--key",
        help="an API key with the ask and ingest scopes (default: RAGTIME_API_KEY, else the "
        "demo key in <data_dir>/demo-api-key)",
    )
    answers.add_argument(
        "--collection", help="the collection the set's documents go into (default: eval-NAME)"
    )
    answers.add_argument(
        "--no-upload",
        action="store_true",
        help="ask the collection as it is, without uploading the set's documents first",
    )
    answers.add_argument(
        "--budgets",
        type=_milliseconds,
        default=(),
        metavar="MS,MS,...",
        help="a run at each of these budgets (default: the server's RAGTIME_BUDGET_MS_DEFAULT)",
    )
    answers.add_argument(
        "--ttft-targets",
        type=_milliseconds,
        default=(),
        metavar="MS,...",
        help="a run at each of these first-token targets; `none` sends none, so the server's "
        "RAGTIME_TTFT_TARGET_MS applies (default: none)",
    )
    answers.add_argument(
        "--limit", type=int, default=0, help="ask the first N questions only (0: all)"
    )
    answers.add_argument(
        "--timeout-s", type=float, default=300.0, help="the longest wait for one answer"
    )
    answers.add_argument("--json", type=Path, help="write the figures and every answer here")
    answers.set_defaults(func=cmd_eval_answers)


def _milliseconds(text: str) -> tuple[int | None, ...]:
    """``"4000,none"`` as (4000, None): whole milliseconds of at least 1, or none."""
    values: list[int | None] = []
    for part in (p.strip() for p in text.split(",")):
        if part.lower() == "none":
            values.append(None)
            continue
        if not part.isdigit() or int(part) < 1:
            raise argparse.ArgumentTypeError(f"not a list of whole milliseconds: {text!r}")
        values.append(int(part))
    return tuple(values)


def cmd_eval_answers(args: argparse.Namespace) -> int:
    from app.evaluation.client import AnswersClient, Unreachable, UploadFailed
    from app.evaluation.dataset import DatasetError, corpus_files, load_dataset
    from app.evaluation.report import answers_json, markdown, summarise

    if args.limit < 0:
        print(f"error: --limit must be 0 or more, got {args.limit}", file=sys.stderr)
        return 2
    try:
        dataset = load_dataset(args.dataset)
        files = [] if args.no_upload else corpus_files(dataset)
    except DatasetError as exc:
        raise CliError(str(exc)) from exc
    cases = dataset.cases[: args.limit] if args.limit else dataset.cases
    url = server_url(args.url)
    collection = args.collection or f"eval-{dataset.name}"

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    rows, runs = [], []
    try:
        key = client_key(args.key)
        with AnswersClient(url, key, collection, timeout_s=args.timeout_s) as client:
            if files:
                say(f"uploading {len(files)} documents into {collection!r} ...")
                say(f"{collection!r} holds {client.upload(files)} chunks of them")
            for target in args.ttft_targets or (None,):
                for budget in args.budgets or (None,):
                    scored = []
                    for n, case in enumerate(cases, 1):
                        scored.append(client.ask(case, budget_ms=budget, ttft_target_ms=target))
                        say(
                            f"budget {budget or 'default'}, TTFT target {target or 'none'}: "
                            f"{n}/{len(cases)} {case.id}: {scored[-1].status}"
                        )
                    row = summarise(scored, budget_ms=budget, ttft_target_ms=target)
                    rows.append(row)
                    runs.append({"row": row.model_dump(), "answers": answers_json(scored)})
    except Unreachable as exc:
        why = connection_reason(exc.__cause__ or exc)
        raise CliError(f"no ragtime server answers at {url} ({why}): {START_A_SERVER}") from exc
    except UploadFailed as exc:
        raise CliError(str(exc)) from exc
    print(
        f"{dataset.name}: {len(cases)} questions at {url}, collection {collection!r}; "
        f"models: {', '.join(sorted({m for r in rows for m in r.models})) or 'none answered'}"
    )
    print(markdown(rows))
    if args.json:
        record = {
            "schema_version": "ragtime-eval-answers/1",
            "dataset": dataset.name,
            "questions": len(cases),
            "url": url,
            "collection": collection,
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(["ragtime", *sys.argv[1:]]),
            "runs": runs,
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0
