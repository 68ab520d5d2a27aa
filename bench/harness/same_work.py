"""The work a question inherently costs ragtime, without ragtime's machinery: what the same-work
floor (``python -m bench.harness.floor --same-work``) does for each request.

``SameWork.prepare`` runs, in order and once each, ragtime's own library calls for a question:
the question screen (``app.safety.moderation.Moderator``, the profanity classifier ragtime's
moderation stage scores with, the same threshold), the embedding of the question by the
embedder of the backend that built the collection (``retrieval.Embedder``, ONNX int8 for the
demo collection), the FAISS search of the collection's stored index and, where ragtime's hybrid
mode runs it (``keyword_weight``: a short query typed to be found by its words, or one naming an
exact term), the BM25 search of its stored keyword index, the two rankings fused by reciprocal
rank (``fuse_passages``), and the prompt assembled by ``inference.prompt.PromptAssembler`` within
the context tokens of the null backend's tokenizer (the generation is null: the floor streams
filler tokens, as the null backend does).

It leaves out what is ragtime's machinery or its extra care: the budget (admission, plans,
deadlines, the cost model), spans and metrics, micro-batching and the caches of recent
questions' scores and vectors (every question is screened and embedded anew), the screen of
retrieved passages for injected instructions, the answer filter (redaction, profanity), the
evidence check, extraction and attribution, and auth. What ragtime costs beyond this floor, on
the same machine and questions, is what its machinery costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.safety.moderation import Moderator, QuestionRejected
from inference.local.null_backend import NullTokenizer
from inference.prompt import AssembledPrompt, PromptAssembler
from retrieval import DocumentStore, Embedder, Passage, fuse_passages, keyword_weight
from retrieval.embedding.embedder import EmbeddingBackend

#: ragtime's defaults (``app.settings``): passages per answer, and the prompt's context tokens.
TOP_K = 4
CONTEXT_TOKENS = 384


@dataclass(frozen=True)
class Prepared:
    """A question's passages, best first, and the prompt assembled over them."""

    passages: list[Passage]
    prompt: AssembledPrompt


class SameWork:
    """ragtime's inherent work for one question, over one collection of a data dir."""

    def __init__(
        self,
        store: DocumentStore,
        embedder: Embedder,
        moderator: Moderator,
        *,
        collection: str = "demo",
        top_k: int = TOP_K,
        context_tokens: int = CONTEXT_TOKENS,
    ) -> None:
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        self.store = store
        self.embedder = embedder
        self.moderator = moderator
        self.collection = collection
        self.top_k = top_k
        self.assembler = PromptAssembler(NullTokenizer(), context_tokens=context_tokens)

    @classmethod
    def open(
        cls,
        data_dir: Path,
        *,
        collection: str = "demo",
        top_k: int = TOP_K,
        context_tokens: int = CONTEXT_TOKENS,
        embedder: Embedder | None = None,
    ) -> SameWork:
        """The store of ``data_dir`` opened (its keyword indexes loaded, as ragtime's warm-up
        does), the collection's own embedder (or ``embedder``) and the classifier loaded.
        ``ValueError`` when the data dir holds no such collection."""
        store = DocumentStore(data_dir / "store")
        store.open()
        if not store.has_collection(collection):
            store.close()
            raise ValueError(f"{data_dir} holds no collection {collection!r}")
        store.load_keyword_indexes()
        if embedder is None:
            backend: EmbeddingBackend = store.embedding_backend_of(collection)  # type: ignore[assignment]
            embedder = Embedder(None, backend=backend, cache_dir=data_dir / "models")
        embedder.load()
        moderator = Moderator()
        moderator.load()
        return cls(
            store,
            embedder,
            moderator,
            collection=collection,
            top_k=top_k,
            context_tokens=context_tokens,
        )

    def close(self) -> None:
        self.store.close()

    def prepare(self, question: str) -> Prepared:
        """The question screened (``QuestionRejected`` at the threshold), embedded, searched
        (vectors, and words where ragtime's hybrid mode would), and its prompt assembled."""
        score = self.moderator.scores([question])[0]
        if score >= self.moderator.threshold:
            raise QuestionRejected(score)
        vector = self.embedder.embed([question])[0]
        collection, k = self.collection, self.top_k
        dense, _ = self.store.search_with_info(collection, vector, k, backend=self.embedder.backend)
        keyword: Sequence[Passage] = []
        weight = 0.0
        if keyword_weight(question, lambda terms: 1.0):  # ragtime's Query.by_words
            keyword, _ = self.store.keyword_search(collection, question, k)
            weight = keyword_weight(
                question, lambda terms: self.store.keyword_rarity(collection, terms)
            )
        passages = fuse_passages(dense, keyword, k, keyword_weight=weight)
        return Prepared(passages, self.assembler.assemble(question, passages))
