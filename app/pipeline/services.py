"""The long-lived parts of the service, built once by the app (``app.main.create_app``) and
started in its lifespan.

``Services`` holds the components (store, models, backend, keys) and the request stages built
over them (``app.stages``). ``Services.start()`` warms each stage up on its own; one that fails
is reported by ``/readyz`` instead of taking the process down, and a missing cross-encoder only
switches reranking off.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from app.keys.auth import BaseKeyStore
from app.keys.stores import open_key_store
from app.safety.moderation import Moderator
from app.settings import Settings, usable_cores
from app.stages import Stages
from inference import (
    BackendUnavailable,
    GatewayClasses,
    GenerationBackend,
    HFTokenizer,
    LlamaCppBackend,
    NullBackend,
    OpenAICompatBackend,
    QuestionClassifier,
    RemoteOptions,
    RoutedBackend,
    SGLangBackend,
)
from retrieval import DocumentStore, Embedder, Embedders, Reranker
from retrieval.ingest.workers import IngestWorkers
from retrieval.rerank.trained import choose_reranker
from tracing import metrics
from tracing.budget import CostModel

log = logging.getLogger(__name__)


def remote_options(settings: Settings) -> RemoteOptions:
    """The options every remote backend (and each routed pool) is built with."""
    return RemoteOptions(
        connect_timeout_s=settings.remote_connect_timeout_s,
        stall_timeout_s=settings.remote_stall_timeout_s,
        health_timeout_s=settings.remote_health_timeout_s,
        poll_interval_s=settings.remote_poll_interval_s,
        deadline_priority=settings.sglang_deadline_priority,
        slo_headers=settings.slo_headers,
        gateway_classes=(
            GatewayClasses.parse(settings.smg_priority_classes)
            if settings.smg_priority_classes is not None
            else None
        ),
        incremental=settings.sglang_incremental_output,
        stream_interval=settings.sglang_stream_interval or None,
        context_length=settings.remote_context_length,
        max_running=settings.remote_max_running,
    )


def default_backend(settings: Settings, costs: CostModel | None = None) -> GenerationBackend:
    """The configured backend: llama.cpp, SGLang or OpenAI-compatible servers, pools of SGLang
    servers behind a router, or the model-free ``NullBackend`` for benches."""
    if settings.generation_backend == "null":
        log.warning("generation backend is null: answers are filler, for benches only")
        return NullBackend()
    if settings.generation_backend == "routed":
        pools = settings.model_pools
        # One tokenizer for every pool (the prompt is assembled before routing).
        first_model = next(iter(pools.values())).model
        return RoutedBackend.sglang(
            {name: pool.model_dump() for name, pool in pools.items()},
            tokenizer=HFTokenizer(settings.served_tokenizer or first_model),
            classifier=QuestionClassifier.from_config(settings.route_rules),
            budget_pool="small" if "small" in pools else None,
            options=remote_options(settings),
        )
    if settings.generation_backend in ("sglang", "openai"):
        model = settings.served_model or ""  # the settings check it is set
        tokenizer = HFTokenizer(settings.served_tokenizer or model)
        if settings.generation_backend == "sglang":
            return SGLangBackend(
                settings.sglang_endpoints,
                model=model,
                tokenizer=tokenizer,
                options=remote_options(settings),
            )
        key = settings.openai_api_key
        return OpenAICompatBackend(
            [settings.openai_base_url or ""],
            model=model,
            tokenizer=tokenizer,
            api_key=key.get_secret_value() if key else None,
            options=remote_options(settings),
        )
    return LlamaCppBackend(
        settings.generation_model_path or None,
        n_ctx=settings.generation_context_window,
        n_threads=settings.generation_threads,
        prompt_threads=settings.generation_prompt_threads or usable_cores(),
        prefix_states=settings.generation_prefix_states,
        costs=costs,
    )


def ingest_workers(settings: Settings) -> IngestWorkers:
    """The worker processes that prepare uploads, as configured."""
    return IngestWorkers(
        max_workers=settings.ingest_workers,
        max_parse_s=settings.ingest_max_parse_s,
        max_memory_mb=settings.ingest_max_memory_mb,
    )


def default_embedder(settings: Settings) -> Embedder:
    """The configured embedder (not loaded): the model on the configured backend."""
    return Embedder(
        settings.embedding_model or None,
        backend=settings.embedding_backend,
        cache_dir=settings.embedding_cache_path,
    )


def default_embedders(settings: Settings, embedder: Embedder | None = None) -> Embedders:
    """The configured embedder (or ``embedder``), which new collections get, and one of each
    other backend an existing collection was built with, made when first needed."""
    if embedder is not None:
        return Embedders(embedder)

    def make(backend: str) -> Embedder:
        return default_embedder(settings.model_copy(update={"embedding_backend": backend}))

    return Embedders(default_embedder(settings), make)


def default_store(settings: Settings, embedder: Embedder) -> DocumentStore:
    """The store (not opened) under the data dir, bound to ``embedder``'s backend: a collection
    built by another backend is refused (409); indexes and snapshots as configured."""
    return DocumentStore(
        settings.store_path,
        embedding_backend=embedder.backend,
        embedding_model=embedder.model_name,
        index_settings=settings.index_settings,
        keep=settings.snapshot_keep,
    )


def default_reranker(settings: Settings) -> Reranker:
    """The configured cross-encoder (not loaded); with none configured, the default
    collection's trained one (``ragtime reranker train``) when its nDCG@10 gain meets the bar."""
    choice = choose_reranker(
        settings.reranker_model, settings.data_dir / "models", settings.default_collection
    )
    if choice.model is None:
        log.info("rerank off: %s", choice.reason)
    elif not settings.reranker_model:
        log.info("rerank with the %s", choice.reason)
    return Reranker(choice.model)


@dataclass
class Services:
    """The components, and the stages over them (``stages``, built with the object)."""

    settings: Settings
    keys: BaseKeyStore
    store: DocumentStore
    embedder: Embedder
    """The configured embedder: new collections get its backend."""
    reranker: Reranker
    backend: GenerationBackend
    moderator: Moderator
    costs: CostModel
    """The process's one cost model: the budget engine plans with it, the stages' threads and
    the local generation backend read the least their work needs from it."""
    problems: dict[str, str] = field(default_factory=dict)
    embedders: Embedders | None = None
    """``embedder`` and one per other backend an existing collection was built with."""
    uploads: IngestWorkers | None = None
    """The worker processes that parse and embed uploads (as configured when not given)."""
    stages: Stages = field(init=False)

    def __post_init__(self) -> None:
        if self.embedders is None:
            self.embedders = Embedders(self.embedder)
        if self.uploads is None:
            self.uploads = ingest_workers(self.settings)
        self.stages = Stages.build(
            self.settings,
            store=self.store,
            embedders=self.embedders,
            reranker=self.reranker,
            backend=self.backend,
            moderator=self.moderator,
            costs=self.costs,
        )

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        backend: GenerationBackend | None = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
        costs: CostModel,
    ) -> Services:
        """Construct every component cheaply: nothing is loaded, opened, connected, started or
        written yet (``start`` does it), so an app built and never started leaves no trace.
        ``backend``, ``embedder`` and ``reranker`` replace the configured ones (tests, benches);
        ``costs`` is the process's one cost model, which the composition root holds (the app's
        door learns into it too)."""
        embedders = default_embedders(settings, embedder)
        return cls(
            settings=settings,
            keys=open_key_store(settings),
            store=default_store(settings, embedders.default),
            embedder=embedders.default,
            embedders=embedders,
            reranker=reranker if reranker is not None else default_reranker(settings),
            backend=backend if backend is not None else default_backend(settings, costs),
            moderator=Moderator(settings.moderation_threshold),
            costs=costs,
        )

    async def _load_collection_embedders(self) -> None:
        """Load the embedder of each collection built with another backend than the configured
        one, so that its first question does not wait for it."""
        for collection in self.store.collections():
            try:
                await asyncio.to_thread(self.embedders_for(collection).load)
            except Exception as exc:
                self.problems["embedder"] = f"{collection}: {type(exc).__name__}: {exc}"
                log.error("could not load the embedder of %r: %s", collection, exc)

    def embedders_for(self, collection: str) -> Embedder:
        """The embedder of ``collection``'s vectors (the configured one for a new one)."""
        assert self.embedders is not None
        return self.embedders.for_collection(self.store, collection)

    async def start(self) -> None:
        """Make the data dir, open the key store, and warm every stage up (models, the index),
        recording what failed instead of raising; the key store's failure (a bad secret file)
        raises."""
        await asyncio.to_thread(self._open_files)
        self.problems = await self.stages.warm_up()
        if "store" not in self.problems and "embedder" not in self.problems:
            await self._load_collection_embedders()
        if "store" not in self.problems:  # pick up snapshots other processes publish
            self.store.watch(self.settings.snapshot_poll_s)

    def _open_files(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.keys.open()

    async def close(self) -> None:
        assert self.uploads is not None
        self.uploads.close()
        self.stages.close()
        await self.backend.close()
        self.store.close()
        self.keys.close()

    def require_generator(self) -> None:
        """``BackendUnavailable`` unless the generation backend is loaded (and its prompts can
        be assembled): before any of an answer's work."""
        if not self.stages.assemble.ready or not self.backend.loaded:
            raise BackendUnavailable(
                "the generation backend is not loaded: "
                + (self.problems.get("generator") or self.backend.not_ready() or "still starting")
            )

    def collection_states(self) -> tuple[dict[str, int], dict[str, str]]:
        """The collections (chunks each) and those that cannot be served (why), as
        ``ragtime_collection_broken`` now says too; none when the store did not open. No I/O."""
        if "store" in self.problems:
            return {}, {}
        collections, broken = self.store.collections(), self.store.check()
        metrics.record_broken_collections(collections, broken)
        return collections, broken

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """Whether every required part is loaded, and what each part's state is."""
        components: dict[str, Any] = {
            "store": self.problems.get("store", "loaded"),
            "embedder": self.problems.get("embedder")
            or ("loaded: " + self.embedder.model_name if self.embedder.loaded else "not loaded"),
            "moderation": self.problems.get("moderation")
            or ("loaded" if self.moderator.loaded else "not loaded"),
            "generator": self.problems.get("generator")
            or (
                f"loaded: {self.backend.name} {self.backend.model}"
                if self.backend.loaded
                else f"not loaded: {self.backend.not_ready() or 'still starting'}"
            ),
            "reranker": self.stages.rerank.status,
        }
        collections, broken = self.collection_states()
        components["collections"] = collections
        ready = not self.problems and self.embedder.loaded and self.backend.loaded
        if broken:  # a collection that cannot be searched answers 503 for itself: re-ingest it
            components["broken_indexes"] = broken
            if not set(collections) - set(broken):
                ready = False  # none can be served
        if ready and not collections:
            components["index"] = "empty: run `ragtime ingest PATH`"
            ready = False
        return ready, components
