"""``ragtime eval answers``: ask a running server every question of a labelled set and score the
answers (``app.evaluation``): key facts, citations against the labels, refusals where the
documents hold no answer, obedience to instructions planted in a document.

The set's documents are uploaded first into their own collection (``--collection``; unchanged
documents are not embedded again), so the demo collection is left as it is. Each run asks every
question once, one at a time, in one answer mode at one budget and one TTFT target; ``--modes``,
``--budgets`` and ``--ttft-targets`` make a run of each triple. A run in the server's own mode
sends no ``answer_mode`` (an older server answers 422 to a field it does not know). The server
may generate with any backend: the report names the models that answered. Prints two Markdown
tables (``--json`` writes every answer too). ``ragtime bench answers`` is this command against
a server it starts from a bench config.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from itertools import product
from pathlib import Path
from typing import Any

from app.cli.ask import START_A_SERVER, client_key, connection_reason, server_url
from app.cli.failures import CliError

#: /2: each run's row names its answer mode, and counts loops, abstentions and the modes that
#: wrote the answers; each answer carries its mode, verdict, finish reason and loop.
SCHEMA_VERSION = "ragtime-eval-answers/2"


#: The values of ``answer_mode`` a run may ask for; ``default`` sends none (the server's own).
ANSWER_MODES = ("generate", "extract", "auto")


def register_eval_answers(eval_sub: Any) -> None:
    """Add ``eval answers`` beside ``eval retrieval``."""
    answers = eval_sub.add_parser(
        "answers",
        help="key facts, citations, refusals, planted instructions and loops, asked of a "
        "running server",
        description="Asks POST /v1/ask of a running ragtime server (start one with `ragtime "
        "serve`) each question of a labelled set, and scores the answers by the rules in "
        "app/evaluation/scoring.py (demo/answers/README.md).",
    )
    add_eval_answers_arguments(answers)
    answers.set_defaults(func=cmd_eval_answers)


def add_eval_answers_arguments(answers: argparse.ArgumentParser) -> None:
    """The options of ``eval answers`` (``ragtime bench answers`` takes them too)."""
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
        "--modes",
        type=_modes,
        default=(),
        metavar="MODE,...",
        help=f"a run in each of these answer modes ({', '.join(ANSWER_MODES)}; `default` sends "
        "none, so the server's own setting applies) (default: default)",
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


def _modes(text: str) -> tuple[str | None, ...]:
    """``"generate,default"`` as ("generate", None): answer modes, ``default`` as None."""
    values: list[str | None] = []
    for part in (p.strip().lower() for p in text.split(",")):
        if part not in (*ANSWER_MODES, "default"):
            raise argparse.ArgumentTypeError(
                f"not a list of answer modes ({', '.join(ANSWER_MODES)}, default): {text!r}"
            )
        values.append(None if part == "default" else part)
    return tuple(values)


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
            for mode, target, budget in product(
                args.modes or (None,), args.ttft_targets or (None,), args.budgets or (None,)
            ):
                scored = []
                for n, case in enumerate(cases, 1):
                    scored.append(
                        client.ask(case, budget_ms=budget, ttft_target_ms=target, answer_mode=mode)
                    )
                    say(
                        f"mode {mode or 'default'}, budget {budget or 'default'}, TTFT target "
                        f"{target or 'none'}: {n}/{len(cases)} {case.id}: {scored[-1].status}"
                    )
                row = summarise(scored, budget_ms=budget, ttft_target_ms=target, mode=mode)
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
            "schema_version": SCHEMA_VERSION,
            "dataset": dataset.name,
            "questions": len(cases),
            "url": url,
            "collection": collection,
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(["ragtime", *without_key(getattr(args, "argv", sys.argv[1:]))]),
            "runs": runs,
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0


def without_key(argv: list[str]) -> list[str]:
    """The arguments as typed, a key given by ``--key`` shown as ``***``: a record never
    holds one (the benches' records use it too)."""
    shown: list[str] = []
    for arg in argv:
        if arg.startswith("--key="):
            shown.append("--key=***")
        elif shown[-1:] == ["--key"]:
            shown.append("***")
        else:
            shown.append(arg)
    return shown
