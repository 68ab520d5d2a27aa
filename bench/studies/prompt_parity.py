"""How many SmolLM2 tokens ragtime's prompt and the Haystack peer's hold for the same questions,
so that the peer's chunks and top-k can be sized to match
(``python -m bench.studies.prompt_parity``, with the ``bench-peers`` extra).

ragtime's prompt is assembled as the CPU default serves it: the demo collection's passages of a
data dir (``bench.harness.same_work``: the same searches and fusion), packed by
``inference.prompt.PromptAssembler`` within ``--context-tokens`` of SmolLM2's own tokenizer.
The peer's is what its ``ChatPromptBuilder`` renders (``bench.peers.haystack_app``), in
SmolLM2's chat template, for each ``--top-k``. Both are counted with the GGUF's vocabulary
(loaded alone: no weights, no decoding); prints the median and range over the questions.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bench.harness.commands import read_questions
from bench.harness.paths import DEMO_QUESTIONS
from bench.harness.same_work import SameWork
from bench.peers.haystack_app import (
    PeerOptions,
    build_rag_pipeline,
    cached_document_store,
    pipeline_inputs,
    smollm2_path,
)
from inference.local.llamacpp_tokenizer import LlamaCppTokenizer
from inference.prompt import PromptAssembler


def _line(name: str, counts: Sequence[int]) -> str:
    return (
        f"{name}: median {statistics.median(counts):.0f} tokens "
        f"({min(counts)}-{max(counts)}, {len(counts)} questions)"
    )


def main(argv: list[str] | None = None) -> None:
    from llama_cpp import Llama

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("bench-results/data"))
    parser.add_argument("--context-tokens", type=int, default=384)
    parser.add_argument("--top-k", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--index-cache", type=Path, default=Path("bench-results/peers"))
    parser.add_argument("--questions", type=Path, default=DEMO_QUESTIONS)
    args = parser.parse_args(argv)
    questions = read_questions(args.questions)
    tokenizer = LlamaCppTokenizer(Llama(str(smollm2_path()), vocab_only=True, verbose=False))
    work = SameWork.open(args.data_dir)
    assembler = PromptAssembler(tokenizer, context_tokens=args.context_tokens)
    ours = [assembler.assemble(q, work.prepare(q).passages).prompt_tokens for q in questions]
    print(_line(f"ragtime (context {args.context_tokens})", ours))
    options = PeerOptions(index_cache=args.index_cache)
    store = cached_document_store(options)
    for top_k in args.top_k:
        rag = build_rag_pipeline(store, replace(options, top_k=top_k))
        counts = []
        for question in questions:
            inputs = pipeline_inputs(question, None)
            result = rag.run(inputs, include_outputs_from={"prompt_builder"})
            messages = result["prompt_builder"]["prompt"]
            rendered = tokenizer.render_chat(
                [{"role": m.role.value, "content": m.text or ""} for m in messages]
            )
            counts.append(tokenizer.count(rendered))
        print(_line(f"Haystack ({options.split_words} words a chunk, top-k {top_k})", counts))


if __name__ == "__main__":
    main()
