"""``ragtime reranker train``: fine-tune the collection's cross-encoder offline.

It starts from the shipped MiniLM, mines queries from the collection's own chunks (leaving out
the evaluation's questions), trains (``retrieval.rerank.training``), and saves the model in
``<data_dir>/models/reranker-NAME`` with its held-out figures; the service uses it by default
only when its evaluation clears the bar (``retrieval.rerank.trained``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.settings import get_settings


def cmd_reranker_train(args: argparse.Namespace) -> int:
    """Fine-tune the collection's cross-encoder from the shipped MiniLM (see
    ``retrieval.rerank.training``) and save it in ``<data_dir>/models/reranker-NAME``."""
    from app.pipeline.services import default_embedder
    from retrieval import DocumentStore, RetrievalError, default_embedding_model_path
    from retrieval.rerank.mining import TrainOptions
    from retrieval.rerank.trained import choose_reranker
    from retrieval.rerank.training import train_reranker

    settings = get_settings()
    questions: list[str] = []
    for name in args.exclude_questions or []:
        path = Path(name)
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            print(f"error: --exclude-questions {path}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        questions += [q.strip() for q in lines if q.strip() and not q.lstrip().startswith("#")]
    try:
        options = TrainOptions(
            max_queries=args.max_queries,
            negatives=args.negatives,
            epochs=args.epochs,
            max_steps=args.max_steps,
            batch_queries=args.batch_queries,
            max_length=args.max_length,
            holdout=args.holdout,
            max_holdout_queries=args.heldout_queries,
            max_minutes=args.max_minutes,
            seed=args.seed,
            learning_rate=args.learning_rate,
            fused_negatives=not args.dense_negatives,
            eval_every=args.eval_every,
            patience=args.patience,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    embedder = default_embedder(settings)
    store = DocumentStore(
        settings.store_path, embedding_backend=embedder.backend, embedding_model=embedder.model_name
    )
    store.open()
    try:
        for name in [args.collection, *(args.also_collection or [])]:
            if not store.has_collection(name):
                known = ", ".join(store.collections()) or "none"
                print(
                    f"error: collection {name!r} holds no chunks in {settings.store_path} "
                    f"(known: {known}); ingest it first with `ragtime ingest PATH --collection "
                    f"{name}`",
                    file=sys.stderr,
                )
                return 1
        embedder.load()
        target, report = train_reranker(
            store,
            embedder,
            args.collection,
            base_model=str(args.base_model or default_embedding_model_path()),
            models_dir=settings.data_dir / "models",
            exclude_questions=questions,
            also_collections=args.also_collection or [],
            options=options,
            progress=lambda line: print(f"  {line}", file=sys.stderr),
        )
    except (RetrievalError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    print(json.dumps(report.heldout, indent=2))
    choice = choose_reranker(None, settings.data_dir / "models", args.collection)
    used = "used by default" if choice.model else "NOT used by default"
    print(f"saved {target}; {used}: {choice.reason}")
    return 0


def register_reranker(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``reranker train`` to the ``ragtime`` parser's subparsers."""
    reranker = sub.add_parser("reranker", help="train the collection's cross-encoder offline")
    reranker_sub = reranker.add_subparsers(dest="reranker_command", required=True)
    train = reranker_sub.add_parser(
        "train", help="fine-tune a cross-encoder from the shipped MiniLM on the collection"
    )
    train.add_argument("--collection", required=True, help="the collection to train on")
    train.add_argument(
        "--exclude-questions",
        action="append",
        metavar="FILE",
        help="questions (one a line, # comments) no query may be close to: the evaluation's "
        "(repeatable); question headings (ending in '?') are always left out",
    )
    train.add_argument("--max-queries", type=int, default=400, help="mined queries at most")
    train.add_argument("--negatives", type=int, default=3, help="hard negatives per query")
    train.add_argument("--epochs", type=int, default=1, help="passes over the mined pairs")
    train.add_argument("--max-steps", type=int, default=60, help="optimiser steps at most")
    train.add_argument("--batch-queries", type=int, default=4, help="queries per step")
    train.add_argument("--max-length", type=int, default=160, help="tokens per pair at most")
    train.add_argument("--holdout", type=float, default=0.15, help="share of queries held out")
    train.add_argument(
        "--heldout-queries", type=int, default=60, help="held-out queries scored at most"
    )
    train.add_argument("--max-minutes", type=float, default=10.0, help="training time at most")
    train.add_argument(
        "--also-collection",
        action="append",
        metavar="NAME",
        help="mine more training pairs from this collection too (repeatable; never held out; "
        "its question headings are queries): e.g. the Debian FAQ",
    )
    train.add_argument("--learning-rate", type=float, default=8e-5, help="the encoder's peak")
    train.add_argument(
        "--dense-negatives",
        action="store_true",
        help="hard negatives from FAISS alone (default: from hybrid search, FAISS fused with BM25)",
    )
    train.add_argument(
        "--eval-every",
        type=int,
        default=0,
        metavar="STEPS",
        help="check half the held-out queries every STEPS steps, stop when --patience checks "
        "in a row do not improve, and keep the best weights (0: off)",
    )
    train.add_argument("--patience", type=int, default=3, help="checks without a gain")
    train.add_argument(
        "--seed", type=int, default=0, help="the random seed of mining, splitting and training"
    )
    train.add_argument("--base-model", help="model to start from (default: the shipped MiniLM)")
    train.set_defaults(func=cmd_reranker_train)
