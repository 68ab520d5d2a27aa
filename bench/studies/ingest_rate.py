"""Time ``ingest_path`` alone on a corpus with the ONNX MiniLM: chunks/s, tokens/s, CPU seconds.

``python -m bench.studies.ingest_rate CORPUS ONNX_CACHE_DIR LABEL``: loads the embedder (from a warm
export cache, so the export is not timed), ingests ``CORPUS`` into a fresh store, and counts
the tokens embedded (title/section line and text of each stored chunk, truncated at 256 as
MiniLM reads them). The same file run against two checkouts compares their ingest.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from tokenizers import Tokenizer

from retrieval import DocumentStore, Embedder, default_embedding_model_path, ingest_path


def main(argv: list[str]) -> int:
    corpus, cache, label = Path(argv[0]), Path(argv[1]), argv[2]
    embedder = Embedder(backend="onnx", cache_dir=cache)
    embedder.load()
    root = Path(tempfile.mkdtemp(prefix="ingest-rate-"))
    store = DocumentStore(
        root / "store", embedding_backend="onnx", embedding_model=embedder.model_name
    )
    store.open()
    cpu0, started = time.process_time(), time.perf_counter()
    report = ingest_path(corpus, collection="demo", embedder=embedder, store=store)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu0
    store.close()
    tokenizer = Tokenizer.from_file(str(default_embedding_model_path() / "tokenizer.json"))
    tokenizer.enable_truncation(256)
    (chunks_db,) = (root / "store").rglob("chunks.sqlite3")  # the one snapshot just published
    rows = sqlite3.connect(chunks_db).execute("select title, section, text from chunks")
    tokens = sum(
        len(tokenizer.encode(f"{t if s in ('', t) else f'{t}: {s}'}\n{x}").ids) for t, s, x in rows
    )
    print(
        f"{label}: {report.files} files, {report.chunks} chunks, {tokens} tokens embedded, "
        f"{elapsed:.1f} s wall: {report.chunks / elapsed:.1f} chunks/s, "
        f"{tokens / elapsed:.0f} tokens/s; {cpu:.1f} CPU-s: {report.chunks / cpu:.1f} chunks "
        f"per CPU-s, {report.chunks * 1000 / tokens:.2f} chunks per 1000 tokens"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
