"""How answers are generated: the backend (llama.cpp in-process, SGLang, OpenAI-compatible,
routed pools of SGLang servers, or null), its model and remote endpoints, and the prompt."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from inference import GatewayClasses, Penalties


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


class GenerationSettings(BaseModel):
    """The generation backend, its servers and model, and what a prompt and an answer may be."""

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
    sglang_priority: int | None = Field(
        None,
        description="Gone: each request's deadline is its priority now, sent only to servers "
        "that schedule by priority (RAGTIME_SGLANG_DEADLINE_PRIORITY). Setting it is an error.",
    )
    sglang_deadline_priority: bool = Field(
        True,
        description="Send each request's deadline as SGLang's `priority` (earliest first) to "
        "servers whose /server_info says they schedule by priority; never to others.",
    )
    slo_headers: bool = Field(
        False,
        description="Send llm-d's x-llm-d-slo-ttft-ms and x-llm-d-slo-tpot-ms headers from each "
        "request's plan (for an llm-d gateway in front of the servers).",
    )
    smg_priority_classes: str | None = Field(
        None,
        description="Send SMG's x-smg-priority class from each request's slack (ms), e.g. "
        "'interactive<1000,default<10000,bulk'; unset: no header.",
    )
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

    @field_validator("sglang_priority")
    @classmethod
    def _priority_is_gone(cls, value: int | None) -> int | None:
        if value is not None:
            raise ValueError(
                "a fixed priority is no longer sent: each request's deadline is its priority, "
                "sent to servers that schedule by priority (RAGTIME_SGLANG_DEADLINE_PRIORITY); "
                "unset RAGTIME_SGLANG_PRIORITY"
            )
        return value

    @field_validator("smg_priority_classes")
    @classmethod
    def _classes_parse(cls, value: str | None) -> str | None:
        if value is not None:
            GatewayClasses.parse(value)
        return value

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
    generation_threads: int = Field(
        1,
        ge=1,
        description="Threads llama.cpp decodes with, a token at a time (one: measured no slower "
        "quiet and several times faster beside busy neighbours; BENCHMARKS.md).",
    )
    generation_prompt_threads: int | None = Field(
        None,
        ge=1,
        description="Threads llama.cpp evaluates a prompt with; empty = the cores the process may "
        "use (its affinity, and its cgroup's CPU quota).",
    )
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
    repeat_penalty: float | None = Field(
        None,
        gt=0.0,
        description="Makes the tokens of the recent text less likely (1: none): llama.cpp's "
        "repeat_penalty (the last 64 tokens), SGLang's repetition_penalty; not sent to an "
        "OpenAI-compatible server. Unset: the backend's own, llama.cpp 1.15 (of 1.0-1.3, the "
        "most key facts over both labelled sets with the fewest loops: docs/studies/answers.md, "
        "'Repetition'), a remote server its default.",
    )
    frequency_penalty: float | None = Field(
        None,
        ge=-2.0,
        le=2.0,
        description="Subtracted from a token's logit per earlier occurrence (OpenAI's, SGLang's "
        "and llama.cpp's frequency_penalty). Unset: the backend's own (llama.cpp: 0).",
    )
    presence_penalty: float | None = Field(
        None,
        ge=-2.0,
        le=2.0,
        description="Subtracted once from the logit of a token that occurred (OpenAI's, "
        "SGLang's and llama.cpp's presence_penalty). Unset: the backend's own (llama.cpp: 0).",
    )
    stop_on_repetition: bool = Field(
        True,
        description="End an answer whose last 8 words come a third time, or whose line starts "
        "a new turn (Question:, Q:, User:), without that repeat or that line.",
    )

    def penalties(self) -> Penalties:
        """What each request asks the backend to penalize (unset: the backend's own)."""
        return Penalties(self.repeat_penalty, self.frequency_penalty, self.presence_penalty)

    def _check_remote_backend(self) -> None:
        """Run by ``Settings``' validator: a remote backend has what it needs to reach."""
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
