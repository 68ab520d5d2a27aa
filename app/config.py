"""Service configuration: one ``Settings`` read from ``RAGTIME_*`` variables, failing fast.

Every key can be set in the environment (``RAGTIME_CONTEXT_TOKENS=512``) or a ``.env`` file.
Model settings take an id or a local path; left empty, the offline default is used (the MiniLM
embedder and SmolLM2 GGUF shipped as pip packages) and no cross-encoder is loaded.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from tracing.budget import StageName

if TYPE_CHECKING:
    from retrieval.search.index_types import IndexSettings

#: ``RAGTIME_WORKERS=auto`` starts at most this many processes (each loads its own models).
AUTO_WORKERS_MAX = 4


def usable_cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


#: How a search finds passages: by vector (``dense``), by BM25 over their words (``keyword``), or
#: both fused by reciprocal rank (``hybrid``).
SearchMode = Literal["dense", "keyword", "hybrid"]

#: Default share of a request's budget per stage; generation gets most of it.
DEFAULT_BUDGET_SHARES: dict[str, float] = {
    StageName.AUTH: 0.01,
    StageName.MODERATE_QUESTION: 0.01,
    StageName.EMBED: 0.04,
    StageName.SEARCH: 0.02,
    StageName.KEYWORD: 0.01,
    StageName.RERANK: 0.11,
    StageName.MODERATE_PASSAGES: 0.01,
    StageName.ASSEMBLE: 0.02,
    StageName.GENERATE: 0.72,
    StageName.MODERATE_ANSWER: 0.03,
    StageName.ATTRIBUTE: 0.02,
}

#: Similarity at which an answer sentence is attributed to a passage; how it was chosen, on a
#: labelled set from the demo corpus: ``app/citations.py``.
DEFAULT_ATTRIBUTION_THRESHOLD = 0.725


def _check_url(url: str) -> str:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"remote endpoints must be http(s) URLs, got {url!r}")
    return url


class ModelPool(BaseModel):
    """One pool of the routed backend: a model and the SGLang servers serving it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1)
    endpoints: list[str] = Field(min_length=1)
    context_length: int | None = Field(
        None, ge=1, description="Its served context length where its servers do not say."
    )
    max_running: int | None = Field(
        None, ge=1, description="Requests each of its servers decodes at once, where not said."
    )

    @field_validator("endpoints")
    @classmethod
    def _check_endpoints(cls, value: list[str]) -> list[str]:
        return [_check_url(url) for url in value]


class Settings(BaseSettings):
    """What an operator can tune; the README lists every key."""

    model_config = SettingsConfigDict(env_prefix="RAGTIME_", env_file=".env", extra="ignore")

    data_dir: Path = Field(Path(".ragtime"), description="Index, chunk store and API keys.")
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    workers: Annotated[int, Field(ge=1, le=64)] | Literal["auto"] = Field(
        "auto",
        description="Server processes behind the one port; each holds its own models, stages "
        "and cost model, and admits what it can finish itself. auto: one per core (at most "
        f"{AUTO_WORKERS_MAX}), or one where more would not serve more: on the in-process "
        "llama.cpp backend (each process would run its own model on the same cores), or with "
        "per-key rate limits kept in process (each process would grant a key its whole rate).",
    )
    serve_reuse_port: bool = Field(
        True,
        description="With several `ragtime serve` processes, each listens on a socket of its "
        "own and the kernel spreads connections across them (SO_REUSEPORT, Linux; app.listeners)"
        ". Off: all share one socket, and whichever process wakes first takes a whole burst.",
    )
    gc_freeze: bool = Field(
        True,
        description="Once `ragtime serve` has started, freeze the objects then alive out of "
        "the garbage collector's full passes (app.heap): a full pass then takes milliseconds, "
        "not the 65-110 ms that stalled the event loop in a burst.",
    )
    default_collection: str = Field("demo", min_length=1)

    embedding_model: str | None = Field(None, description="Id or path; empty = shipped MiniLM.")
    # onnx: the same vectors as torch (cosine 1.0000 on 200 demo chunks), 2x its batch
    # throughput and a fraction of its one-question latency; onnx-int8 is faster still (1.49
    # against 3.35 ms a question) and scored nDCG@10 0.730 against fp32's 0.723 on the whole
    # Python FAQ evaluation, though its cosine to torch is 0.985 (BENCHMARKS.md, bench/embed.py).
    embedding_backend: Literal["torch", "onnx", "onnx-int8"] = Field(
        "onnx-int8",
        description="The backend new collections are embedded with: torch "
        "(sentence-transformers), or ONNX Runtime on the model's own export, fp32 or int8 "
        "weights. An existing collection keeps the backend that built it (its questions, "
        "attribution and later ingests use it) until rebuilt with `ragtime ingest --rebuild`.",
    )
    embedding_cache_dir: Path | None = Field(
        None, description="Where ONNX exports are written (once); empty = <data_dir>/models."
    )
    # Ingest chunking: sizes in tokens of the embedding model's own tokenizer, the heading line
    # embedded above each chunk included (retrieval/ingest/chunking.py; measured in BENCHMARKS.md).
    chunk_tokens: int = Field(
        256, ge=16, le=8192, description="Largest chunk, in embedding-model tokens."
    )
    chunk_overlap_tokens: int = Field(
        32, ge=0, le=4096, description="Tokens a chunk repeats from the one before it."
    )

    @model_validator(mode="after")
    def _check_chunk_overlap(self) -> Settings:
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            raise ValueError(
                f"chunk_overlap_tokens ({self.chunk_overlap_tokens}) must be less than "
                f"chunk_tokens ({self.chunk_tokens})"
            )
        return self

    reranker_model: str | None = Field(None, description="Cross-encoder id or path; empty = none.")
    rerank_candidates: int = Field(20, ge=1, le=200, description="Passages scored by rerank.")
    rerank_batch_size: int = Field(
        8,
        ge=1,
        le=200,
        description="Candidates scored together: rerank scores batches best-first while the "
        "next one fits its share of the budget, then keeps the found order for the rest.",
    )
    top_k: int = Field(4, ge=1, le=50, description="Passages given to the prompt by default.")
    # Measured with `ragtime eval retrieval` on the Python FAQ and keyword sets (BENCHMARKS.md,
    # "Hybrid retrieval"): the mode that did best on both together.
    search_mode: SearchMode = Field(
        "hybrid",
        description="How /v1/ask (and /v1/search without `mode`) finds passages: dense "
        "vectors, BM25 keywords, or both fused by reciprocal rank (k=60).",
    )
    max_top_k: int = Field(20, ge=1, le=200)

    # Snapshots and indexes (retrieval/store/document_store.py, retrieval/search/index_types.py).
    max_search_k: int = Field(
        100, ge=1, le=10_000, description="Largest k of /v1/search (apart from max_top_k)."
    )
    snapshot_keep: int = Field(3, ge=1, le=100, description="Snapshots kept per collection.")
    snapshot_poll_s: float = Field(
        1.0, ge=0.0, le=3600.0, description="Seconds between checks for a newer snapshot; 0: off."
    )
    index_kind: Literal["auto", "flat", "hnsw", "ivfpq"] = "auto"
    index_threshold: int = Field(50_000, ge=1, description="auto: flat below this many chunks.")
    index_large_kind: Literal["hnsw", "ivfpq"] = "hnsw"
    index_hnsw_m: int = Field(32, ge=4, le=256)
    index_hnsw_ef_construction: int = Field(80, ge=8, le=4096)
    # 128: the smallest of 16/32/64/128 with recall@10 >= 0.95 at 1M vectors, p50 0.46 ms on one
    # core (BENCHMARKS.md, FAISS index types); 64 gave 0.93 there.
    index_hnsw_ef_search: int = Field(128, ge=1, le=4096)
    index_ivf_nlist: int = Field(1024, ge=1, le=1 << 20)
    index_ivf_nprobe: int = Field(16, ge=1, le=1 << 20)
    index_pq_m: int = Field(48, ge=1, le=384)
    index_use_gpu: bool = Field(True, description="Index on a GPU when CUDA and faiss-gpu are.")

    generation_backend: Literal["llama.cpp", "null", "sglang", "openai", "routed"] = Field(
        default="llama.cpp",
        description="llama.cpp (in-process), sglang or openai (remote), routed (pools of "
        "SGLang servers), or null: benches only.",
    )
    # The routed backend: pools of SGLang servers sharing one tokenizer (served_tokenizer).
    model_pools: dict[str, ModelPool] = Field(
        default_factory=dict,
        description='JSON: {"small": {"model": ..., "endpoints": [...]}, "large": {...}}.',
    )
    route_rules: dict[str, Any] | None = Field(
        None, description="JSON overriding the question classifier (rules, long_chars, ...)."
    )
    # Remote backends (sglang, openai): the served model and its own tokenizer.
    sglang_endpoints: list[str] = Field(
        default_factory=list,
        description="SGLang base URLs (JSON list), servers or SGLang's gateway; tried least "
        "loaded first.",
    )
    sglang_priority: int | None = Field(None, description="Sent as `priority` when set.")
    sglang_incremental_output: bool = Field(
        False, description="The servers run with --incremental-streaming-output."
    )
    sglang_stream_interval: int = Field(
        2,
        ge=0,
        description="Sent as sampling_params.stream_interval (SGLang): the first token at once, "
        "then a chunk every N tokens, which overrides the server's --stream-interval. Each "
        "chunk costs ragtime about the same CPU whatever it carries: 2 took a quarter less "
        "CPU an answer than 1 at GPU-like timings, with the same TTFT (BENCHMARKS.md). 0: send "
        "none (the server's own).",
    )
    served_model: str | None = Field(None, description="Model name/path the server serves.")
    served_tokenizer: str | None = Field(
        None, description="Its tokenizer: HF id or path; empty = served_model."
    )
    openai_base_url: str | None = Field(None, description="e.g. http://vllm:8000/v1")
    openai_api_key: SecretStr | None = None
    remote_connect_timeout_s: float = Field(2.0, gt=0)
    remote_stall_timeout_s: float = Field(10.0, gt=0, description="No byte for this long: fail.")
    remote_health_timeout_s: float = Field(
        5.0, gt=1.0, description="Readiness and load polls (SGLang's /health takes >= 1 s)."
    )
    remote_poll_interval_s: float = Field(
        2.0, gt=0, description="Seconds between background polls of every remote endpoint."
    )
    remote_context_length: int | None = Field(
        None,
        ge=1,
        description="The served context length where a remote endpoint does not say (SGLang's "
        "gateway in front of 0.5.23 workers tells none); what it reports wins.",
    )
    remote_max_running: int | None = Field(
        None,
        ge=1,
        description="Requests each remote server (each worker behind a gateway) decodes at "
        "once, where it does not say; what it reports wins.",
    )
    generation_model_path: str | None = Field(None, description="GGUF path; empty = SmolLM2.")
    generation_threads: int | None = Field(None, ge=1)
    generation_context_window: int = Field(2048, ge=256)
    generation_prefix_states: int = Field(
        4, ge=0, le=64, description="KV states of recent prompts llama.cpp keeps to restore."
    )
    context_tokens: int = Field(
        384, ge=32, description="Token budget for passages in a prompt (measured: BENCHMARKS.md)."
    )
    prompt_layout: Literal["shared_prefix_first", "question_first"] = Field(
        "shared_prefix_first",
        description="Passages before the question (prefix-cache friendly); the other for benches.",
    )
    max_output_tokens: int = Field(192, ge=1)
    temperature: float = Field(0.0, ge=0.0, le=2.0)

    budget_ms_default: int = Field(15_000, ge=1)
    budget_ms_min: int = Field(50, ge=1)
    budget_ms_max: int = Field(120_000, ge=1)
    question_max_chars: int = Field(2000, ge=1)
    max_body_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="Largest request body of a question route; larger ones are refused (413).",
    )
    moderation_threshold: float = Field(0.9, gt=0.0, le=1.0)
    attribution_threshold: float = Field(
        DEFAULT_ATTRIBUTION_THRESHOLD,
        ge=-1.0,
        le=1.0,
        description="Cosine similarity at which an answer sentence is attributed to a passage "
        "(chosen on a labelled set: app/citations.py).",
    )
    attribution_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="How many steps below the process's priority the attribution stage's "
        "threads run (Linux). It works after an answer's last token, for its done event: "
        "under load the CPU goes first to the stages before someone's first token. 0: the "
        "same priority.",
    )
    record_content: bool = Field(False, description="Put the question text on spans.")
    retry_after_s: int = Field(5, ge=1, description="Retry-After sent with 503 answers.")
    max_in_flight: int = Field(
        256,
        ge=1,
        description="A hard bound on the question requests (/v1/ask, /v1/chat/completions, "
        "/v1/search) a process holds at once, plus the decoding slots of the remote generation "
        "servers serving now; more are refused at once (503 overloaded). Below it, a request is "
        "admitted when it is predicted to finish within its budget (app.admission).",
    )
    admit_as_parsed: bool = Field(
        True,
        description="Decide admission in the HTTP protocol as a question request is parsed, "
        "before any task is made for it, so a refusal does not wait behind the work admitted "
        "before it (app.early_admission; `ragtime serve` only). Off: the middleware decides, "
        "in the request's first step.",
    )
    serve_read_ahead: bool = Field(
        True,
        description="`ragtime serve`: a thread of each process accepts and reads its "
        "connections ahead of the event loop and decides question requests' admission there, "
        "so that a refusal is sent as its request arrives, not once the loop, busy with the "
        "work it admitted, gets round to reading it (app.read_ahead). Needs "
        "RAGTIME_ADMIT_AS_PARSED, and Linux. Off: the loop reads every connection.",
    )
    admission_margin: float = Field(
        0.1,
        ge=0.0,
        lt=1.0,
        description="The share of each budget admission keeps free of predicted work: a "
        "request is admitted when it is predicted to finish this much before its deadline "
        "(the answer's last bytes still have to reach the client).",
    )
    max_queued_per_slot: int = Field(
        64,
        ge=0,
        description="A hard bound on the answers that may wait per decoding slot of a generation "
        "target; more are refused at arrival (503 overloaded). Below it, an answer is refused "
        "when the predicted wait at the target leaves no room for its smallest plan.",
    )
    shutdown_grace_s: float = Field(
        10.0,
        ge=0,
        description="On SIGTERM, how long requests in flight may run on (new ones get 503 "
        "`shutting_down`); then a stream ends with an `error` event, a request not yet answered "
        "gets the 503, and the process exits within 2 s.",
    )

    # The budget engine.
    budget_shares: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_BUDGET_SHARES),
        description="Each stage's share of a request's budget (JSON object).",
    )
    ttft_target_ms: int = Field(
        600,
        ge=0,
        description="Time-to-first-token target, from arrival: the budget engine prefers plans "
        "predicted to meet it (pruning or cutting the context) while they keep "
        "`ttft_min_quality` of the answer, and a first token later than it is marked on the "
        "trace; 0: none.",
    )
    ttft_min_quality: float = Field(
        0.9,
        ge=0.0,
        le=1.0,
        description="The least quality, as a share of the best plan's (quality.json), that a "
        "plan may keep to meet the TTFT target; below it the target is missed instead.",
    )
    context_pruning: bool = Field(
        True,
        description="Whether the budget engine may fill a prompt's context with each passage's "
        "sentences closest to the question (priced by the `pruned` curve of the quality table).",
    )
    degradation_policy: bool = Field(True, description="Plan within the budget (off: never).")
    on_infeasible: Literal["fail", "passages"] = Field(
        "fail", description="When no plan fits: 504, or answer with the passages alone."
    )
    min_context_tokens: int = Field(64, ge=0)
    min_output_tokens: int = Field(16, ge=1)
    budget_quantile: float = Field(
        0.9, gt=0.0, lt=1.0, description="Plans are sized to this quantile of observed costs."
    )
    budget_halflife_requests: float = Field(
        16.0, gt=0, description="An observed cost weighs half after this many newer ones."
    )
    budget_halflife_s: float = Field(
        120.0, gt=0, description="... and half after this many seconds (drift back to the prior)."
    )
    budget_quality_path: Path | None = Field(
        None, description="Quality per saving (JSON, from `ragtime bench quality`); empty: shipped."
    )
    calibrate: bool = Field(
        True, description="Probe remote targets when they join (off: plan with the priors)."
    )
    calibration_interval_s: float = Field(
        10.0, gt=0, description="Seconds between checks for remote targets to calibrate."
    )
    # Fault injection, for benches and tests only.
    fault_rerank_delay_ms: float = Field(0.0, ge=0.0)
    fault_generate_token_delay_ms: float = Field(0.0, ge=0.0)

    # Alerts evaluated in-process (the conditions of deploy/prometheus/alerts.yml).
    alert_webhook_url: str | None = Field(
        None, description="Where firing and resolved alerts are posted; empty = nowhere."
    )
    alert_interval_s: float = Field(15.0, gt=0, description="Seconds between evaluations.")
    alert_window_s: float = Field(300.0, gt=0, description="Rates are taken over this window.")
    alert_for_s: float = Field(300.0, ge=0, description="How long a condition holds to fire.")
    alert_cooldown_s: float = Field(3600.0, ge=0, description="Re-send a firing alert after.")
    alert_stage_violation_ratio: float = Field(0.05, gt=0, le=1)
    alert_ttft_p95_s: float = Field(2.0, gt=0)
    alert_error_ratio: float = Field(0.05, gt=0, le=1)

    # Tenants, keys and limits (app/auth.py, app/ratelimit.py, app/routes/collections.py).
    key_secret: SecretStr | None = Field(
        None,
        description="Server secret of the keys' HMAC digests; empty: <data_dir>/key-secret, "
        "made at first run.",
    )
    rate_limit_per_s: float = Field(
        0.0, ge=0.0, description="Requests per second each API key may make; 0: no limit."
    )
    rate_limit_burst: int = Field(
        20, ge=1, description="Requests a key may make at once before its rate applies."
    )
    redis_url: str | None = Field(
        None, description="Keep rate limits in this Redis (shared by replicas); empty: in process."
    )
    redis_timeout_s: float = Field(
        0.25, gt=0, description="Longest wait for Redis; past it the request is let through."
    )
    max_upload_bytes: int = Field(
        8 * 1024 * 1024,
        ge=1024,
        description="Largest body of a document upload (POST /v1/collections/NAME/documents).",
    )
    # What one uploaded (or ingested) file may make ingest do; over one: 413 (422 for time),
    # naming the setting, and nothing of the upload is ingested.
    ingest_max_member_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Bytes one member of a DOCX or XLSX inflates to."
    )
    ingest_max_inflated_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1024,
        description="Bytes all members of one DOCX or XLSX inflate to together.",
    )
    ingest_max_pages: int = Field(2_000, ge=1, description="Pages of one PDF.")
    ingest_max_rows: int = Field(
        100_000, ge=1, description="Rows of one spreadsheet (an XLSX's sheets together, or a CSV)."
    )
    ingest_max_paragraphs: int = Field(
        200_000, ge=1, description="Paragraphs (text blocks, table rows) of one document."
    )
    ingest_max_chunks: int = Field(20_000, ge=1, description="Chunks one document makes.")
    ingest_max_image_pixels: int = Field(
        40_000_000,
        ge=10_000,
        description="Pixels of an image (a TIFF's frame) to OCR, read from its header before it "
        "is decoded; a scanned PDF page is rendered within it.",
    )
    ingest_max_parse_s: float = Field(
        60.0,
        gt=0,
        description="Seconds an upload's worker may spend parsing one file before it is killed "
        "(422).",
    )
    ingest_max_memory_mb: int = Field(
        2048,
        ge=128,
        description="Resident memory an upload's worker process may use (model included) before "
        "it is killed (413).",
    )
    ingest_workers: int = Field(
        2,
        ge=1,
        le=64,
        description="Uploads parsed and embedded at once, each in a worker process of its own; "
        "more wait their turn.",
    )
    database_url: SecretStr | None = Field(
        None,
        description="Keep API keys in this PostgreSQL (postgresql://...); empty: SQLite in "
        "<data_dir>.",
    )

    @field_validator("key_secret", "redis_url", "database_url", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        """``RAGTIME_REDIS_URL=`` (as an env file writes an unset value) means unset."""
        return None if isinstance(value, str) and not value.strip() else value

    @model_validator(mode="after")
    def _check_key_store(self) -> Settings:
        if self.database_url is not None and self.key_secret is None:
            raise ValueError(
                "database_url needs key_secret: every replica that shares the key database "
                "must hash keys with the same secret (set RAGTIME_KEY_SECRET)"
            )
        return self

    @field_validator("alert_webhook_url")
    @classmethod
    def _check_webhook_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"alert_webhook_url must be an http(s) URL, got {value!r}")
        return value

    @model_validator(mode="after")
    def _check_remote_backend(self) -> Settings:
        if self.generation_backend == "sglang" and not self.sglang_endpoints:
            raise ValueError("generation_backend sglang needs sglang_endpoints (a JSON list)")
        if self.generation_backend == "openai" and not self.openai_base_url:
            raise ValueError("generation_backend openai needs openai_base_url")
        if self.generation_backend in ("sglang", "openai") and not self.served_model:
            raise ValueError(f"generation_backend {self.generation_backend} needs served_model")
        if self.generation_backend == "routed":
            self._check_pools()
        for url in [*self.sglang_endpoints, self.openai_base_url or "http://"]:
            _check_url(url)
        return self

    def _check_pools(self) -> None:
        from inference import QuestionClassifier

        if not self.model_pools:
            raise ValueError("generation_backend routed needs model_pools (a JSON object)")
        urls = [u.rstrip("/") for pool in self.model_pools.values() for u in pool.endpoints]
        if len(set(urls)) != len(urls):
            raise ValueError("model_pools lists an endpoint twice")
        classifier = QuestionClassifier.from_config(self.route_rules)
        missing = classifier.pools - set(self.model_pools)
        if missing:
            raise ValueError(f"route_rules send questions to unknown pools: {sorted(missing)}")

    @model_validator(mode="after")
    def _check_ranges(self) -> Settings:
        if not self.budget_ms_min <= self.budget_ms_default <= self.budget_ms_max:
            raise ValueError(
                "budget_ms_default must lie within [budget_ms_min, budget_ms_max], got "
                f"{self.budget_ms_default} outside [{self.budget_ms_min}, {self.budget_ms_max}]"
            )
        if self.top_k > self.max_top_k:
            raise ValueError(f"top_k ({self.top_k}) must not exceed max_top_k ({self.max_top_k})")
        unknown = set(self.budget_shares) - set(DEFAULT_BUDGET_SHARES)
        if unknown:
            raise ValueError(f"budget_shares names unknown stages: {sorted(unknown)}")
        if (
            any(v < 0 for v in self.budget_shares.values())
            or sum(self.budget_shares.values()) > 1.0 + 1e-9
        ):
            raise ValueError("budget_shares must be non-negative and sum to at most 1")
        if self.alert_window_s < self.alert_interval_s:
            raise ValueError("alert_window_s must be at least alert_interval_s")
        # llama.cpp's window is ours to set; a remote server's context length is read from it
        # and the prompt fitted to it per request.
        if (
            self.generation_backend == "llama.cpp"
            and self.context_tokens + self.max_output_tokens > self.generation_context_window
        ):
            raise ValueError(
                "context_tokens + max_output_tokens must fit generation_context_window "
                "(with room for the system prompt and question)"
            )
        return self

    @property
    def serve_workers(self) -> int:
        """The processes ``ragtime serve`` starts: ``workers``, with ``auto`` resolved."""
        if self.workers != "auto":
            return self.workers
        if self.generation_backend == "llama.cpp":
            return 1
        if self.rate_limit_per_s > 0 and not self.redis_url:
            return 1
        return min(usable_cores(), AUTO_WORKERS_MAX)

    @property
    def keys_path(self) -> Path:
        return self.data_dir / "keys.sqlite3"

    @property
    def embedding_cache_path(self) -> Path:
        return self.embedding_cache_dir or self.data_dir / "models"

    @property
    def store_path(self) -> Path:
        return self.data_dir / "store"

    @property
    def index_settings(self) -> IndexSettings:
        """The ``RAGTIME_INDEX_*`` settings as ``retrieval.search.index_types`` takes them."""
        from retrieval.search.index_types import IndexSettings

        return IndexSettings(
            kind=self.index_kind,
            threshold=self.index_threshold,
            large_kind=self.index_large_kind,
            hnsw_m=self.index_hnsw_m,
            hnsw_ef_construction=self.index_hnsw_ef_construction,
            hnsw_ef_search=self.index_hnsw_ef_search,
            ivf_nlist=self.index_ivf_nlist,
            ivf_nprobe=self.index_ivf_nprobe,
            pq_m=self.index_pq_m,
            use_gpu=self.index_use_gpu,
        )

    @property
    def demo_key_path(self) -> Path:
        return self.data_dir / "demo-api-key"


@lru_cache
def get_settings() -> Settings:
    """The process's settings (tests build their own ``Settings`` and pass it to the app)."""
    return Settings()
