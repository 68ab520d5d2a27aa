"""Security: the API keys' secret and store, per-key rate limits, and whether a question's text
may go on spans (it can be private)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, SecretStr, field_validator


class SecuritySettings(BaseModel):
    """Keys, their store and rate limits (app/keys/auth.py, app/keys/ratelimit.py); content on
    spans."""

    record_content: bool = Field(False, description="Put the question text on spans.")
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

    def _check_key_store(self) -> None:
        """Run by ``Settings``' validator."""
        if self.database_url is not None and self.key_secret is None:
            raise ValueError(
                "database_url needs key_secret: every replica that shares the key database "
                "must hash keys with the same secret (set RAGTIME_KEY_SECRET)"
            )
