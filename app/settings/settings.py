"""Service configuration: one ``Settings`` read from ``RAGTIME_*`` variables, failing fast.

Every key can be set in the environment (``RAGTIME_CONTEXT_TOKENS=512``) or a ``.env`` file.
Model settings take an id or a local path; left empty, the offline default is used (the MiniLM
embedder and SmolLM2 GGUF shipped as pip packages) and no cross-encoder is loaded.

``Settings`` is built from one part per concern, each a model of its own module that declares its
fields (and checks what it alone can); it checks the values that must agree across parts, and
reads as one flat object: ``settings.top_k``, ``settings.alert_interval_s``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.settings.admission import AdmissionSettings
from app.settings.alerts import AlertSettings
from app.settings.answers import AnswerSettings
from app.settings.budget import BudgetSettings
from app.settings.checks import CheckSettings
from app.settings.generation import GenerationSettings
from app.settings.ingest_limits import IngestLimitSettings
from app.settings.page import PageSettings
from app.settings.retrieval import RetrievalSettings
from app.settings.security import SecuritySettings
from app.settings.serve import AUTO_WORKERS_MAX, ServeSettings, usable_cores


# pydantic lists a class's fields from its last base to its first, so the parts stand here in
# reverse: the server's fields come first, the ingest limits' last.
class Settings(
    IngestLimitSettings,
    PageSettings,
    SecuritySettings,
    AlertSettings,
    BudgetSettings,
    AdmissionSettings,
    CheckSettings,
    AnswerSettings,
    GenerationSettings,
    RetrievalSettings,
    ServeSettings,
    BaseSettings,
):
    """What an operator can tune; docs/configuration.md lists every key."""

    model_config = SettingsConfigDict(env_prefix="RAGTIME_", env_file=".env", extra="ignore")

    @model_validator(mode="after")
    def _check(self) -> Settings:
        """The parts' own checks, then the values that must agree across parts. The order is
        kept: it decides which error a setting with several faults is refused with."""
        self._check_chunk_overlap()
        self._check_key_store()
        self._check_remote_backend()
        self._check_ranges()
        return self

    def _check_ranges(self) -> None:
        if not self.budget_ms_min <= self.budget_ms_default <= self.budget_ms_max:
            raise ValueError(
                "budget_ms_default must lie within [budget_ms_min, budget_ms_max], got "
                f"{self.budget_ms_default} outside [{self.budget_ms_min}, {self.budget_ms_max}]"
            )
        if self.top_k > self.max_top_k:
            raise ValueError(f"top_k ({self.top_k}) must not exceed max_top_k ({self.max_top_k})")
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
    def embedding_cache_path(self) -> Path:
        return self.embedding_cache_dir or self.data_dir / "models"


@lru_cache
def get_settings() -> Settings:
    """The process's settings (tests build their own ``Settings`` and pass it to the app)."""
    return Settings()
