"""``ragtime eval retrieval``: the retrieval evaluation on the configured models and settings.

The command builds the dataset from data fetched at set-up (``make eval-data``) by its name in
``retrieval.eval.sets``: the Python FAQ's questions, or keyword queries (``python-keywords``)
or remembered phrases (``python-phrases``) drawn from the same corpus, or the Debian FAQ's
(``debian-faq``) or the GNU Emacs FAQ's (``emacs-faq``) questions; runs
``retrieval.eval.evaluate`` in the search ``--mode`` (default the configured one), with the
configured embedder and chunking, the configured
cross-encoder (when one loads) and any ``--reranker``, the configured rerank candidates,
``top_k`` and context tokens, and the llama.cpp model's tokenizer for the prompt rows, and prints
a Markdown table (``--json`` writes the figures). A trained reranker's gain goes into its
record.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from app.cli.eval_answerable import register_eval_answerable
from app.cli.eval_answers import register_eval_answers
from app.settings import Settings, get_settings

#: The names of ``retrieval.eval.sets.SETS``, here so that the parser needs no retrieval import.
DATASETS = ("python-faq", "python-keywords", "python-phrases", "debian-faq", "emacs-faq")


def register_eval(sub: Any) -> None:
    """Add ``eval retrieval`` to the ``ragtime`` parser's subparsers."""
    evaluation = sub.add_parser(
        "eval", help="evaluate retrieval, or the answers of a running server, on real questions"
    )
    eval_sub = evaluation.add_subparsers(dest="eval_command", required=True)
    retrieval = eval_sub.add_parser(
        "retrieval",
        help="recall@1/5/10, MRR and nDCG@10 of a baseline, ragtime, rerank and each saving",
        description="Needs the data fetched once by `make eval-data`. Keeps its store and "
        "vectors in --work-dir and reuses them while data, models and ingest code are unchanged.",
    )
    retrieval.add_argument(
        "--dataset",
        choices=DATASETS,
        required=True,
        help="the questions: the Python FAQ's, keyword queries or remembered phrases drawn "
        "from the same corpus, the Debian FAQ's or the GNU Emacs FAQ's",
    )
    retrieval.add_argument(
        "--data", type=Path, help="where `make eval-data` put it (default: <data_dir>/eval)"
    )
    retrieval.add_argument(
        "--work-dir", type=Path, help="store and vectors (default: <data_dir>/eval/work)"
    )
    retrieval.add_argument(
        "--mode",
        choices=("dense", "keyword", "hybrid"),
        help="how ragtime's rows search: vectors, BM25 keywords, or both fused by reciprocal "
        "rank (default: RAGTIME_SEARCH_MODE)",
    )
    retrieval.add_argument("--depth", type=int, default=100, help="chunks retrieved per question")
    retrieval.add_argument(
        "--limit", type=int, default=0, help="use the first N questions only (0: all)"
    )
    retrieval.add_argument(
        "--sample",
        type=float,
        default=1.0,
        help="keep this share (0-1] of the documents other than the answers (1: all)",
    )
    retrieval.add_argument(
        "--reranker",
        action="append",
        default=[],
        metavar="MODEL",
        help="also rerank with this cross-encoder (a path or id; repeatable), beside "
        "RAGTIME_RERANKER_MODEL. A model `ragtime reranker train` saved gets this run's figures "
        "in its ragtime-training.json (`evaluation`), which decides whether the service uses it",
    )
    retrieval.add_argument(
        "--rerank-budgets",
        type=_milliseconds,
        default=(),
        metavar="MS,MS,...",
        help="also rerank within each of these shares of time per question, as the rerank "
        "stage does (batches of RAGTIME_RERANK_BATCH_SIZE, best first, until the share runs "
        "out): nDCG@10 against rerank time",
    )
    retrieval.add_argument("--json", type=Path, help="write the figures here")
    retrieval.set_defaults(func=cmd_eval_retrieval)
    register_eval_answers(eval_sub)
    register_eval_answerable(eval_sub)


def _milliseconds(text: str) -> tuple[float, ...]:
    """``"5,10,20"`` as milliseconds, each 0 or more."""
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of milliseconds: {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"milliseconds must be 0 or more: {text!r}")
    return values


def _packer(settings: Settings) -> Any:
    """The prompt assembler with the llama.cpp model's tokenizer (vocabulary only), or None for
    other generation backends."""
    if settings.generation_backend != "llama.cpp":
        return None
    from inference import PromptAssembler
    from inference.local.llamacpp import default_generation_model_path
    from inference.local.llamacpp_threads import import_llama_cpp
    from inference.local.llamacpp_tokenizer import LlamaCppTokenizer

    llama_cpp = import_llama_cpp()
    path = settings.generation_model_path or str(default_generation_model_path())
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    return PromptAssembler(LlamaCppTokenizer(llm), context_tokens=settings.context_tokens)


def _rerankers(settings: Settings, extra: list[str], say: Any) -> list[Any]:
    from retrieval import Reranker, RerankerUnavailable

    found = []
    for name in dict.fromkeys([settings.reranker_model, *extra]):
        if not name:
            continue
        reranker = Reranker(name)
        try:
            reranker.load()
        except RerankerUnavailable as exc:
            say(f"reranker left out: {exc}")
            continue
        found.append(reranker)
    return found


def _baseline_embedder(settings: Settings) -> Any:
    """Plain MiniLM, on ONNX Runtime (fp32: torch's vectors, twice as fast) unless torch is
    configured."""
    from retrieval import Embedder

    if settings.embedding_backend == "torch":
        return Embedder(backend="torch")
    return Embedder(backend="onnx", cache_dir=settings.embedding_cache_path)


def _record_gains(report: Any, say: Any) -> None:
    """Each trained reranker's gain over vector order, into its own record."""
    from retrieval.rerank.trained import record_evaluation

    vector = next(row for row in report.rows if row.kind == "vector")
    for row in report.rows:
        if row.kind != "rerank" or row.level != "full" or not Path(row.model).is_dir():
            continue
        gain = round(row.scores.ndcg_at_10 - vector.scores.ndcg_at_10, 4)
        figures = {
            "dataset": report.dataset,
            "sample": report.sample,
            "questions": report.questions,
            "candidates": report.settings["rerank_candidates"],
            "ndcg10": round(row.scores.ndcg_at_10, 4),
            "vector_ndcg10": round(vector.scores.ndcg_at_10, 4),
            "gain_ndcg10": gain,
            "ms_per_candidate_p50": row.ms_per_candidate_p50,
        }
        if record_evaluation(Path(row.model), figures):
            say(f"{row.model}: nDCG@10 {gain:+.3f} over vector order, written to its record")


def cmd_eval_retrieval(args: argparse.Namespace) -> int:
    from app.pipeline.services import default_embedder
    from retrieval.eval import EvalDataMissing, evaluate, table
    from retrieval.eval.sets import build_set

    settings = get_settings()

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    data = args.data or settings.data_dir / "eval"
    work = args.work_dir or settings.data_dir / "eval" / "work"
    if args.depth < 10:
        print(f"error: --depth must be at least 10, got {args.depth}", file=sys.stderr)
        return 2
    if not 0.0 < args.sample <= 1.0:
        print(f"error: --sample must be in (0, 1], got {args.sample}", file=sys.stderr)
        return 2
    try:
        dataset = build_set(args.dataset, data, work / "corpus", sample=args.sample)
    except EvalDataMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.limit > 0:
        dataset.questions[:] = dataset.questions[: args.limit]
    say(f"{dataset.name}: {len(dataset.questions)} questions, {dataset.documents} documents")
    report = evaluate(
        dataset,
        mode=args.mode or settings.search_mode,
        embedder=default_embedder(settings),
        baseline_embedder=_baseline_embedder(settings),
        rerankers=_rerankers(settings, args.reranker, say),
        packer=_packer(settings),
        rerank_candidates=settings.rerank_candidates,
        rerank_budgets_ms=args.rerank_budgets,
        rerank_batch_size=settings.rerank_batch_size,
        top_k=settings.top_k,
        context_tokens=settings.context_tokens,
        min_context_tokens=settings.min_context_tokens,
        chunk_tokens=settings.chunk_tokens,
        overlap_tokens=settings.chunk_overlap_tokens,
        depth=args.depth,
        work_dir=work,
        say=say,
    )
    print(table(report))
    _record_gains(report, say)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(report.to_json())
        say(f"wrote {args.json}")
    return 0
