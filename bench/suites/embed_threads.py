"""``ragtime bench embed-threads``: ONNX Runtime's one-thread session against its session with a
thread per core, on the small batches a server embeds (a question, an answer's sentences).

Each round runs every batch size on both sessions, in turns, on the same encoder
(``OnnxSentenceEncoder``, the shipped MiniLM); the table gives the medians of the rounds' mean
wall and CPU time per call (the process's CPU time: both threads of the wide session count).
``retrieval.embedding.onnx_encoder.ONE_THREAD_TOKENS`` was chosen from this table.

    ragtime bench embed-threads [--backend onnx-int8] [--sizes 1,4,8,16,32] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from bench.harness.commands import positive_ints

#: What each timed text says: an answer-like sentence of about 20 tokens.
SENTENCE = "Use the default value of a parameter by writing name equals value in the def line."


def _timed(encoder: Any, session: Any, texts: list[str], calls: int) -> tuple[float, float]:
    """Mean wall and CPU milliseconds of ``calls`` runs of ``texts`` as one batch on
    ``session``."""
    encodings = encoder._tokenizer.encode_batch(texts)
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        encoder._run(encodings, session)
    return (
        (time.perf_counter() - wall) / calls * 1000,
        (time.process_time() - cpu) / calls * 1000,
    )


def measure(backend: str, sizes: list[int], rounds: int, cache_dir: Path) -> list[dict[str, Any]]:
    """Per batch size and session: the medians over ``rounds`` of wall and CPU ms a call."""
    from retrieval.embedding.embedder import default_embedding_model_path
    from retrieval.embedding.onnx_encoder import OnnxSentenceEncoder

    encoder = OnnxSentenceEncoder(
        default_embedding_model_path(), cache_dir, int8=backend == "onnx-int8"
    )
    sessions = {"one thread": encoder._one_thread, "thread per core": encoder._session}
    samples: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for _ in range(rounds):
        for size in sizes:
            texts = [SENTENCE] * size
            calls = max(5, 160 // size)
            for name, session in sessions.items():
                _timed(encoder, session, texts, 2)  # warm
                samples.setdefault((size, name), []).append(_timed(encoder, session, texts, calls))
    tokens = len(encoder._tokenizer.encode(SENTENCE).ids)
    return [
        {
            "texts": size,
            "padded_tokens": size * tokens,
            "session": name,
            "wall_ms": statistics.median(w for w, _ in found),
            "cpu_ms": statistics.median(c for _, c in found),
        }
        for (size, name), found in samples.items()
    ]


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| texts | padded tokens | one thread: wall / CPU ms | thread per core: wall / CPU ms |",
        "| --- | --- | --- | --- |",
    ]
    by_size: dict[int, dict[str, dict[str, Any]]] = {}
    for row in rows:
        by_size.setdefault(row["texts"], {})[row["session"]] = row
    for size, pair in sorted(by_size.items()):
        one, wide = pair["one thread"], pair["thread per core"]
        lines.append(
            f"| {size} | {one['padded_tokens']} | {one['wall_ms']:.2f} / {one['cpu_ms']:.2f} "
            f"| {wide['wall_ms']:.2f} / {wide['cpu_ms']:.2f} |"
        )
    return "\n".join(lines)


def register(subparsers: Any) -> None:
    """Add ``embed-threads`` to ``ragtime bench``'s subcommands."""
    threads = subparsers.add_parser(
        "embed-threads",
        help="ONNX Runtime's one-thread session against a thread per core, on small batches",
    )
    threads.add_argument(
        "--backend", choices=("onnx", "onnx-int8"), default="onnx-int8",
        help="the ONNX embedding backend timed",
    )  # fmt: skip
    threads.add_argument(
        "--sizes", type=positive_ints, default=[1, 4, 8, 16, 32], help="texts a batch"
    )
    threads.add_argument("--rounds", type=int, default=5, help="timing rounds")
    threads.add_argument("--cache-dir", type=Path, help="ONNX exports (default: the server's)")
    threads.add_argument("--json", type=Path, help="write the result here")
    threads.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from retrieval.embedding.onnx_encoder import default_cache_dir

    rows = measure(args.backend, args.sizes, args.rounds, args.cache_dir or default_cache_dir())
    if args.json:
        from bench.harness.record import write_figures

        write_figures({"backend": args.backend, "rows": rows}, args.json)
    print(table(rows))
    return 0
