"""``ragtime bench quality``: its options and its run, on the demo questions or on the Python
FAQ evaluation (``--python-faq``); ``measure`` holds the measurement."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.harness.commands import DEMO_QUESTIONS, argv_of, read_questions


def register(subparsers: Any) -> None:
    """Add ``quality`` to ``ragtime bench``'s subcommands."""
    quality = subparsers.add_parser(
        "quality",
        help="what each saving (smaller context, capped output) costs in answer quality",
        description="In-process on the configured models (RAGTIME_* settings): answers with "
        "the full plan, with smaller contexts (cut and pruned) and cut short, scored by the "
        "reference's content words they keep (bench.suites.quality.measure): each question's own "
        "answer with "
        "--python-faq, else the first passage of the configured collection. Writes the curves "
        "the degradation policy weighs its savings with.",
    )
    quality.add_argument(
        "--questions", type=Path, default=DEMO_QUESTIONS,
        help="questions, one a line (without --python-faq)",
    )  # fmt: skip
    quality.add_argument("--limit", type=int, default=12, help="questions used")
    quality.add_argument(
        "--python-faq",
        type=Path,
        metavar="DATA",
        help="measure on the Python FAQ evaluation fetched into DATA (`make eval-data`)",
    )
    quality.add_argument(
        "--answers",
        metavar="DATASET",
        help="measure on a labelled answer set (python-docs: demo/answers), scored by the key "
        "facts each answer holds, as `ragtime eval answers` scores them; its documents are "
        "ingested into the collection eval-NAME of the configured data dir first",
    )
    quality.add_argument(
        "--work-dir", type=Path, help="its store, as `ragtime eval retrieval` keeps it"
    )
    quality.add_argument(
        "--sample", type=float, default=0.25, help="share of the other documents kept"
    )
    quality.add_argument(
        "--table", type=Path, help="write the QualityTable here (e.g. tracing/budget/quality.json)"
    )
    quality.add_argument(
        "--model-only",
        action="store_true",
        help="with --table: write only the measured model's own curves (its `models` entry), "
        "the table's default curves kept",
    )
    quality.add_argument("--json", type=Path, help="write the measurement here")
    quality.add_argument(
        "--from-json",
        type=Path,
        metavar="JSON",
        help="measure nothing: write --table (and print the curves) from a measurement an "
        "earlier run wrote with --json",
    )
    quality.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from app.settings import get_settings
    from bench.suites.quality.measure import QualityResult, measure_quality

    if args.from_json:
        return _emit(args, QualityResult.model_validate_json(args.from_json.read_text("utf-8")))
    settings = get_settings()
    if args.python_faq:
        return _quality_on_python_faq(args, settings)
    if args.answers:
        return _quality_on_answers(args, settings)
    questions = read_questions(args.questions)[: args.limit]
    measured = asyncio.run(measure_quality(questions, settings=settings))
    return _write_quality(args, settings, measured, QualityResult.model_fields["measure"].default)


def _quality_on_python_faq(args: argparse.Namespace, settings: Any) -> int:
    import asyncio

    from app.pipeline.services import default_embedder
    from bench.suites.quality.measure import faq_cases, measure_quality
    from retrieval.eval import EvalDataMissing, build_dataset, require_sources
    from retrieval.eval.retrievers import COLLECTION, ragtime_store

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    work = args.work_dir or settings.data_dir / "eval" / "work"
    try:
        dataset = build_dataset(
            require_sources(args.python_faq), work / "corpus", sample=args.sample
        )
    except EvalDataMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    embedder = default_embedder(settings)
    embedder.load()
    store = ragtime_store(
        dataset,
        embedder,
        work,
        say,
        chunk_tokens=settings.chunk_tokens,
        overlap_tokens=settings.chunk_overlap_tokens,
    )
    try:
        step = max(1, len(dataset.questions) // max(args.limit, 1))
        chosen = dataset.questions[::step][: args.limit]  # spread over the FAQ's pages
        answers = {
            q.text: (dataset.corpus_dir / q.answer_source).read_text(encoding="utf-8")
            for q in chosen
        }
        cases = faq_cases(store, COLLECTION, embedder, answers, settings.top_k)
        measured = asyncio.run(measure_quality(list(answers), settings=settings, cases=cases))
    finally:
        store.close()
    measure = (
        "the content words of each question's own answer (the Python FAQ's, as its authors "
        f"wrote it) that the answer holds, relative to the full plan, over {measured.questions} "
        f"Python FAQ questions (other documents sampled at {args.sample:.0%})"
    )
    return _write_quality(args, settings, measured, measure)


def _quality_on_answers(args: argparse.Namespace, settings: Any) -> int:
    """The answerable questions of a labelled set (the planted ones too: they have answers),
    over its documents, scored by their key facts."""
    import asyncio

    from app.evaluation.dataset import DatasetError, load_dataset
    from app.pipeline.services import default_embedder, default_store
    from bench.suites.quality.measure import demo_cases, measure_quality
    from retrieval import ingest_path

    try:
        dataset = load_dataset(args.answers)
    except DatasetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    collection = f"eval-{dataset.name}"
    embedder = default_embedder(settings)
    embedder.load()
    store = default_store(settings, embedder)
    store.open()
    try:
        for folder in dataset.corpus:  # unchanged files are not embedded again
            ingest_path(
                folder,
                collection=collection,
                embedder=embedder,
                store=store,
                chunk_tokens=settings.chunk_tokens,
                overlap_tokens=settings.chunk_overlap_tokens,
            )
    finally:
        store.close()
    chosen = [c for c in dataset.cases if c.facts][: args.limit]
    facts = {c.question: c.facts for c in chosen}
    cases = demo_cases(settings, collection=collection, facts=facts)
    measured = asyncio.run(measure_quality(list(facts), settings=settings, cases=cases))
    measure = (
        f"the key facts each answer holds (`ragtime eval answers`' rule), relative to the full "
        f"plan, over {measured.questions} questions of the {dataset.name} answer set "
        f"(demo/answers), retrieved from its documents ({collection})"
    )
    return _write_quality(args, settings, measured, measure)


def _write_quality(args: argparse.Namespace, settings: Any, measured: Any, measure: str) -> int:
    from bench.harness.record import command_line, machine_info, now_iso, versions
    from bench.suites.quality.measure import QualityResult

    result = QualityResult(
        created=now_iso(),
        command=command_line(argv_of(args)),
        machine=machine_info(),
        versions=versions(),
        questions=measured.questions,
        model=measured.model,
        context_tokens=settings.context_tokens,
        max_output_tokens=settings.max_output_tokens,
        full_score_mean=round(measured.full_score, 3),
        full_generate_ms_p50=round(measured.full_ms, 1),
        context=measured.context,
        output=measured.output,
        pruned=measured.pruned,
        measure=measure,
    )
    return _emit(args, result)


def _emit(args: argparse.Namespace, result: Any) -> int:
    """Print the measurement's curves; write its JSON (``--json``) and its table
    (``--table``: the file there, else the shipped one, updated: its default curves and the
    measured model's own; with ``--model-only``, the model's alone)."""
    from bench.harness.record import write_json
    from bench.suites.quality.tables import model_table, quality_table, table
    from tracing.budget import DEFAULT_QUALITY_PATH, QualityTable

    print(table(result))
    if args.json:
        write_json(result, args.json)
    if args.table:
        shipped = QualityTable.load(args.table if args.table.is_file() else DEFAULT_QUALITY_PATH)
        if args.model_only:
            if not result.model:
                print("error: the measurement names no model", file=sys.stderr)
                return 1
            models = {**shipped.models, result.model: model_table(result)}
            built = QualityTable(shipped.curves, shipped.notes, models)
        else:
            rerank = shipped.curves.get("rerank", [(0.0, 0.95), (1.0, 1.0)])
            built = quality_table(result, rerank, shipped)
        built.dump(args.table)
        print(f"wrote {args.table}", file=sys.stderr)
    return 0
