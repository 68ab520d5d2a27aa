"""The retrieval stages: embed the question, search the collection's index (its vectors, its
BM25 keyword index, or both: the ``Query``'s mode says which), and the two rankings fused
(``found_candidates``, by the rerank stage, ``app.stages.rerank``)."""

from __future__ import annotations

import asyncio
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from app.settings import SearchMode
from app.stages.batching import MicroBatcher
from app.stages.recent import Recent
from app.stages.result import StageResult
from app.stages.threads import StageThreads
from retrieval import (
    DocumentStore,
    Embedder,
    Embedders,
    KeywordInfo,
    Passage,
    SearchFilter,
    SearchInfo,
    UnknownCollection,
    fuse_passages,
    keyword_weight,
)
from retrieval.embedding.embedder import vector_family
from tracing.budget import Allowance, StageName


@dataclass(frozen=True)
class Query:
    """What a request searches for: its text, in which collection (within ``search_filter``),
    the ``k`` passages it wants, and how (``mode``: by vectors, by words, or both)."""

    text: str
    collection: str
    k: int
    mode: SearchMode
    search_filter: SearchFilter | None = None

    @property
    def by_vectors(self) -> bool:
        """Whether the collection's vectors are searched (dense or hybrid)."""
        return self.mode != "keyword"

    @property
    def by_words(self) -> bool:
        """Whether the keyword index is searched: in keyword mode; in hybrid mode when the
        query's words may weigh in the fusion (``KeywordSearch.weight``: a query neither typed to
        be found by its words nor naming an exact term is not), and the plan keeps the side."""
        return bool(KeywordSearch.weight(self.text, self.mode))

    @property
    def words_required(self) -> bool:
        """Whether the keyword side is the whole search (keyword mode): the plan cannot drop it."""
        return self.mode == "keyword"


@dataclass(frozen=True)
class Embedded(StageResult):
    """The question's vector, the model that made it, and the batch it was embedded in (the
    questions of concurrent requests share one model call), or that it came from the cache of
    recent questions (``cached``: no model call at all)."""

    vector: np.ndarray
    model: str
    batch_size: int = 1
    batch_wait_ms: float = 0.0
    cached: bool = False
    backend: str = ""
    """The embedding backend that made it: the collection's own."""

    def attributes(self) -> dict[str, str | int | float]:
        return {
            "ragtime.embed.model": self.model,
            "ragtime.embed.backend": self.backend,
            "ragtime.embed.batch_size": self.batch_size,
            "ragtime.embed.batch_wait_ms": round(self.batch_wait_ms, 3),
            "ragtime.embed.cached": self.cached,
        }


#: Recent questions' vectors kept (a 384-dimension vector is 1.5 KB: 1.5 MB in all).
EMBED_CACHE_SIZE = 1024


def normalised(question: str) -> str:
    """The form of a question its cached vector is found by: Unicode NFC, runs of whitespace as
    one space, none at the ends. Case is kept: a cased model embeds it."""
    return " ".join(unicodedata.normalize("NFC", question).split())


class EmbedQuestion:
    """Embeds a question with the embedder of the collection it searches (``Embedders``: each
    collection keeps the backend that built it), in one batch with the questions of concurrent
    requests for the same vectors; a question asked again (as ``normalised`` reads it) takes its
    vector from the cache of the ``cache_size`` most recent ones, without the model."""

    name = StageName.EMBED
    component = "embedder"

    def __init__(
        self,
        embedders: Embedder | Embedders,
        threads: StageThreads,
        *,
        cache_size: int = EMBED_CACHE_SIZE,
        embedder_for: Callable[[str], Embedder] | None = None,
    ) -> None:
        self.embedders = embedders if isinstance(embedders, Embedders) else Embedders(embedders)
        self.threads = threads
        self.embedder_for = embedder_for or (lambda collection: self.embedders.default)
        """A collection's embedder: the backend that built its vectors."""
        self.cache_size = cache_size
        self._batchers: dict[str, MicroBatcher[str, np.ndarray]] = {}
        self._cache: Recent[tuple[str, str, str], np.ndarray] = Recent(cache_size)

    async def warm_up(self) -> None:
        await asyncio.to_thread(self.embedders.default.load)

    async def run(self, query: Query, allowance: Allowance) -> Embedded:
        """The query's vector, by its collection's embedder."""
        embedder = self.embedder_for(query.collection)
        return await self.embed_question(query.text, deadline=allowance.deadline, embedder=embedder)

    async def embed_question(
        self, question: str, *, deadline: float, embedder: Embedder | None = None
    ) -> Embedded:
        """``question``'s vector from ``embedder`` (default: the configured one), loaded on its
        first use."""
        embedder = embedder or self.embedders.default
        model, backend = embedder.model_name, embedder.backend
        key = (model, vector_family(backend), normalised(question))
        vector = self._cache.get(key)
        if vector is not None:
            return Embedded(vector, model, batch_size=0, cached=True, backend=backend)
        batched = await self._batcher(embedder).submit(key[2], deadline=deadline)
        vector = batched.value
        vector.setflags(write=False)  # shared by every request that asks it again
        self._cache.put(key, vector)
        return Embedded(vector, model, batched.batch_size, batched.wait_ms, backend=backend)

    def _batcher(self, embedder: Embedder) -> MicroBatcher[str, np.ndarray]:
        family = vector_family(embedder.backend)
        batcher = self._batchers.get(family)
        if batcher is None:

            def embed(questions: list[str]) -> list[np.ndarray]:
                embedder.load()  # at once when loaded; a collection's other backend: first use
                return list(embedder.embed(questions))

            batcher = self._batchers[family] = MicroBatcher(embed, self.threads)
        return batcher


def _found_attributes(stage: str, found: Found | KeywordFound) -> dict[str, str | int | float]:
    """A search's span attributes, under ``ragtime.<stage>.``: what it looked for and found,
    then how it ran and its filter."""
    passages = found.passages
    attributes: dict[str, str | int | float] = {
        f"ragtime.{stage}.collection": found.collection,
        f"ragtime.{stage}.k": found.k,
        f"ragtime.{stage}.results": len(passages),
        f"ragtime.{stage}.top_score": passages[0].score if passages else 0.0,
    }
    if found.info is not None:
        attributes |= found.info.attributes()
    if found.search_filter is not None:
        attributes |= found.search_filter.attributes()
    return attributes


@dataclass(frozen=True)
class Found(StageResult):
    """The nearest passages of a collection, best first, and how the search ran: the snapshot
    and its index (kind, efSearch or nprobe...), the device, and the filter."""

    collection: str
    k: int
    passages: list[Passage]
    info: SearchInfo | None = None
    search_filter: SearchFilter | None = None

    def attributes(self) -> dict[str, str | int | float]:
        return _found_attributes("search", self)


@dataclass(frozen=True)
class Vectorised:
    """A query and its vector: what the dense search looks with."""

    query: Query
    embedded: Embedded


class SearchIndex:
    """Finds the ``k`` passages nearest a vector in one collection's FAISS index."""

    name = StageName.SEARCH
    component = "store"

    def __init__(self, store: DocumentStore, threads: StageThreads) -> None:
        self.store = store
        self.threads = threads

    async def warm_up(self) -> None:
        await asyncio.to_thread(self.store.open)

    def check(self, collection: str, search_filter: SearchFilter | None = None) -> None:
        """Raise ``UnknownCollection`` before any work is spent on a collection that does not
        exist (a read of the store's collection list: no lock, no I/O). The message names no
        other collection: a caller learns nothing of what else is stored. ``InvalidFilter``
        for a filter on a file type the collection does not hold."""
        if not self.store.has_collection(collection):
            raise UnknownCollection(f"unknown collection {collection!r}")
        if search_filter is not None:
            self.store.check_filter(collection, search_filter)

    async def run(self, asked: Vectorised, allowance: Allowance) -> Found:
        """The query's nearest passages, as many as the budget's search depth."""
        query, embedded = asked.query, asked.embedded
        return await self.search_vectors(
            query.collection, embedded.vector, allowance.depth,
            deadline=allowance.deadline, search_filter=query.search_filter,
            backend=embedded.backend,
        )  # fmt: skip

    async def search_vectors(
        self,
        collection: str,
        vector: np.ndarray,
        k: int,
        *,
        deadline: float,
        search_filter: SearchFilter | None = None,
        backend: str | None = None,
    ) -> Found:
        """The ``k`` nearest passages to ``vector``, made by the embedding ``backend`` (the
        store's own when None; another collection's vectors are a 409)."""
        self.check(collection)
        passages, info = await self.threads.call(
            self.store.search_with_info, collection, vector, k, search_filter,
            backend=backend, deadline=deadline,
        )  # fmt: skip
        active = search_filter if search_filter is not None and search_filter.active else None
        return Found(collection, k, passages, info, active)


@dataclass(frozen=True)
class KeywordFound(StageResult):
    """The passages of a collection that best match the query's words (BM25), best first, and
    how the search ran: the snapshot, where its keyword index came from, and the filter."""

    collection: str
    k: int
    passages: list[Passage]
    info: KeywordInfo | None = None
    search_filter: SearchFilter | None = None
    weight: float = 1.0
    """Its ranking's weight in hybrid fusion (``keyword_weight``), as rare as the query's exact
    terms are in this collection."""

    def attributes(self) -> dict[str, str | int | float]:
        return _found_attributes("keyword", self) | {"ragtime.keyword.weight": self.weight}


class KeywordSearch:
    """Finds the ``k`` passages of one collection that best match a query's words, in its
    snapshot's BM25 index (loaded at the first keyword search; built in memory, once, for a
    snapshot written before it was kept)."""

    name = StageName.KEYWORD
    component = "store"

    def __init__(self, store: DocumentStore, threads: StageThreads) -> None:
        self.store = store
        self.threads = threads

    async def warm_up(self) -> None:
        """Open the store and load each collection's stored BM25 index: the first keyword
        search of a fresh process took 14.8 ms against 0.8 ms for the next (the null-backend
        bench, docs/studies/ceiling-and-overhead.md "ragtime's own path over the floor, again")."""
        await asyncio.to_thread(self.store.open)
        await asyncio.to_thread(self.store.load_keyword_indexes)

    @staticmethod
    def weight(query: str, mode: SearchMode) -> float:
        """The most the keyword ranking may weigh for ``query`` in ``mode``: 1 alone, none in
        dense mode; in hybrid mode ``keyword_weight``'s with its exact terms as rare as can be
        (the search itself says how rare they are in the collection: ``KeywordFound.weight``),
        none (the side is not run) for a query neither typed to be found by its words nor
        naming an exact term."""
        if mode == "hybrid":
            return keyword_weight(query, lambda terms: 1.0)
        return 1.0 if mode == "keyword" else 0.0

    async def run(self, query: Query, allowance: Allowance) -> KeywordFound:
        """The passages that best match the query's words, as many as the search depth."""
        return await self.search_words(
            query.collection, query.text, allowance.depth,
            deadline=allowance.deadline, search_filter=query.search_filter,
        )  # fmt: skip

    async def search_words(
        self,
        collection: str,
        query: str,
        k: int,
        *,
        deadline: float,
        search_filter: SearchFilter | None = None,
    ) -> KeywordFound:
        if not self.store.has_collection(collection):
            raise UnknownCollection(f"unknown collection {collection!r}")

        def search() -> tuple[list[Passage], KeywordInfo, float]:
            passages, info = self.store.keyword_search(collection, query, k, search_filter)
            rarity = lambda terms: self.store.keyword_rarity(collection, terms)  # noqa: E731
            return passages, info, keyword_weight(query, rarity)

        passages, info, weight = await self.threads.call(search, deadline=deadline)
        active = search_filter if search_filter is not None and search_filter.active else None
        return KeywordFound(collection, k, passages, info, active, weight)


def found_candidates(
    mode: SearchMode,
    dense: Found | None,
    keyword: KeywordFound | None,
    limit: int,
) -> list[Passage]:
    """What rerank chooses from, each passage marked with the searches that found it: in hybrid
    mode the two rankings fused by reciprocal rank, the keyword one (when its side ran) at the
    weight its search gave it; else the one search's ranking."""
    dense_passages = dense.passages if dense is not None else []
    keyword_passages = keyword.passages if keyword is not None else []
    if mode == "hybrid":
        weight = keyword.weight if keyword is not None else 0.0
        return fuse_passages(dense_passages, keyword_passages, limit, keyword_weight=weight)
    return [replace(p, found_by=(mode,)) for p in dense_passages or keyword_passages]
