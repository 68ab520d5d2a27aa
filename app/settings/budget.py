"""The latency budget: a request's budget and its bounds, the TTFT target, how plans degrade,
how costs are learned and calibrated, and the faults benches inject. Each stage's allocation is
the plan's, not a setting (``tracing.budget.ledger``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


class BudgetSettings(BaseModel):
    """What the budget engine is told."""

    budget_ms_default: int = Field(15_000, ge=1)
    budget_ms_min: int = Field(50, ge=1)
    budget_ms_max: int = Field(120_000, ge=1)

    # The budget engine.
    ttft_target_ms: int = Field(
        0,
        ge=0,
        description="The service's time-to-first-token target, from arrival, for operators who "
        "want fast first tokens over whole answers: the budget engine then prefers plans "
        "predicted to meet it (pruning or cutting the context, and saying so) while they keep "
        "`ttft_min_quality` of the answer, and a first token later than it is marked on the "
        "trace. 0 (the default): none, the budget alone decides; a request may still ask for "
        "its own (`ttft_target_ms`). Also the TTFT alert's: answers held to a target observe "
        "their first token over it (`ragtime_ttft_target_ratio`), and `RagtimeTTFTP95High` "
        "fires when more than 5% of them miss it.",
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
