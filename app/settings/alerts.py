"""The alerts evaluated in-process (the conditions of deploy/prometheus/alerts.yml): where they
are posted, how often and over what window, and their thresholds."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator


class AlertSettings(BaseModel):
    """The in-process alerts."""

    alert_webhook_url: str | None = Field(
        None, description="Where firing and resolved alerts are posted; empty = nowhere."
    )
    alert_interval_s: float = Field(15.0, gt=0, description="Seconds between evaluations.")
    alert_window_s: float = Field(300.0, gt=0, description="Rates are taken over this window.")
    alert_for_s: float = Field(300.0, ge=0, description="How long a condition holds to fire.")
    alert_cooldown_s: float = Field(3600.0, ge=0, description="Re-send a firing alert after.")
    alert_budget_violation_ratio: float = Field(0.05, gt=0, le=1)
    alert_stage_violation_ratio: float = Field(0.05, gt=0, le=1)
    alert_error_ratio: float = Field(0.05, gt=0, le=1)

    @field_validator("alert_webhook_url")
    @classmethod
    def _check_webhook_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"alert_webhook_url must be an http(s) URL, got {value!r}")
        return value
