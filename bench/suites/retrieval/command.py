"""``ragtime bench retrieval``: its options (collection sizes such as ``10k,100k,1M``) and its
run (the measurement, ``indexes``, loads FAISS, so it is imported only when the command runs)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from bench.harness.commands import positive_ints


def register(subparsers: Any) -> None:
    """Add ``retrieval`` to ``ragtime bench``'s subcommands."""
    retrieval = subparsers.add_parser(
        "retrieval",
        help="FAISS index types (Flat, HNSW, IVF-PQ) at collection sizes: latency, recall, "
        "build time, memory, ingest throughput",
        description="In-process on synthetic clustered 384-d vectors "
        "(bench.suites.retrieval.indexes).",
    )
    retrieval.add_argument(
        "--sizes",
        type=sizes,
        default=[10_000, 100_000, 1_000_000],
        metavar="N[,N...]",
        help="collection sizes, with k or M suffixes allowed (10k,100k,1M)",
    )
    retrieval.add_argument(
        "--types", type=names, default=["flat", "hnsw", "ivfpq"], help="index types compared"
    )
    retrieval.add_argument(
        "--ef-search", type=positive_ints, default=[16, 32, 64, 128],
        help="HNSW efSearch values tried",
    )  # fmt: skip
    retrieval.add_argument(
        "--nprobe", type=positive_ints, default=[8, 32], help="IVF-PQ nprobe values tried"
    )
    retrieval.add_argument("--queries", type=int, default=200, help="timed one at a time")
    retrieval.add_argument("--clusters", type=int, default=1000, help="IVF-PQ clusters (nlist)")
    retrieval.add_argument(
        "--threads",
        type=int,
        default=1,
        help="FAISS OpenMP threads for building (default 1: on a shared 2-core machine, 2 "
        "threads spin-waited IVF-PQ training on 500 vectors from 2 s to 35 s); searches run on "
        "one thread, as the store's",
    )
    retrieval.add_argument(
        "--index-dir",
        type=Path,
        help="save each built HNSW or IVF-PQ index here, and load it in a later run of the same "
        "size, kind and seed instead of building it again (build figures are kept beside it)",
    )
    retrieval.add_argument("--json", type=Path, help="write the figures here")
    retrieval.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from bench.harness.record import write_figures
    from bench.suites.retrieval.indexes import run_bench, table

    try:
        result = run_bench(
            args.sizes,
            kinds=args.types,
            ef_search=args.ef_search,
            nprobe=args.nprobe,
            queries=args.queries,
            clusters=args.clusters,
            threads=args.threads,
            index_dir=args.index_dir,
            say=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(result))
    if args.json:
        write_figures(result.to_dict(), args.json)
    return 0


def sizes(text: str) -> list[int]:
    """``10k,100k,1M`` as [10000, 100000, 1000000]."""
    scale = {"k": 1_000, "m": 1_000_000}
    try:
        return [
            int(float(part[:-1]) * scale[part[-1].lower()])
            if part[-1].lower() in scale
            else int(part)
            for part in (p.strip() for p in text.split(","))
        ]
    except (ValueError, IndexError):
        raise argparse.ArgumentTypeError(
            f"not a list of sizes like 10k,100k,1M: {text!r}"
        ) from None


def names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]
