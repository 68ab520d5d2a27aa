"""Quality curves that rise above the full setting, and a table per served model: the planner
takes the plan of best measured quality for the model a target serves, not the most context
that fits."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.plans import LIMITS, LINEAR
from tracing.budget import (
    BudgetEngine,
    BudgetLedger,
    CostModel,
    DegradationPolicy,
    GenerationPrior,
    PlanLimits,
    QualityTable,
)

#: 50 ms to the first token, 2 ms a prompt token, 10 ms an answer token, 10 ms a candidate.
PRIOR = GenerationPrior(fixed_ms=50.0, prefill_ms_per_token=2.0, decode_ms_per_token=10.0)
#: Half the context answers 20% better than all of it; a quarter 15% worse.
LESS_IS_MORE = QualityTable(
    {
        "context": [(0.0, 0.0), (0.25, 0.85), (0.5, 1.2), (0.75, 1.0), (1.0, 1.0)],
        "output": LINEAR.curves["output"],
    }
)
MODEL = "SmolLM2-135M-Instruct.Q4_1"


def costs() -> CostModel:
    return CostModel({"rerank": 10.0}, PRIOR)


def policy(table: QualityTable) -> DegradationPolicy:
    return DegradationPolicy(costs(), LIMITS, table)


# -- the curves ----------------------------------------------------------------------------


def test_a_curve_may_rise_above_its_full_setting_and_still_ends_there() -> None:
    assert LESS_IS_MORE.quality("context", 0.5) == 1.2
    assert LESS_IS_MORE.quality("context", 0.625) == pytest.approx(1.1)
    assert LESS_IS_MORE.quality("context", 1.0) == 1.0
    assert LESS_IS_MORE.better_than_full("context", 0.5)
    assert not LESS_IS_MORE.better_than_full("context", 0.75)
    assert LESS_IS_MORE.ceiling() == pytest.approx(1.2)
    assert LINEAR.ceiling() == 1.0


@pytest.mark.parametrize(
    ("curve", "why"),
    [
        ([(0.0, 0.0), (0.5, 1.2)], "must end at the full setting"),
        ([(0.0, 0.0), (1.0, 1.1)], "must end at the full setting"),
        ([(0.0, -0.1), (1.0, 1.0)], "at least 0"),
        ([(0.0, float("nan")), (1.0, 1.0)], "finite"),
        ([(0.0, 0.0), (1.5, 1.0)], r"fractions in \[0, 1\]"),
    ],
)
def test_a_curve_off_its_reference_or_out_of_range_is_refused(
    curve: list[tuple[float, float]], why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        QualityTable({"context": curve})


def test_the_whole_context_pruned_may_keep_less_than_the_whole_context() -> None:
    """Pruning's reference is the whole context unpruned: its curve ends at what pruning the
    whole context kept."""
    table = QualityTable({"pruned": [(0.0, 0.0), (0.25, 1.04), (1.0, 0.78)]})
    assert table.quality("pruned", 1.0) == 0.78


# -- the planner ---------------------------------------------------------------------------


def test_with_budget_to_spare_the_better_smaller_context_is_planned_and_is_no_degradation() -> None:
    plan = policy(LESS_IS_MORE).plan(60_000, k=4, rerank_available=False, target="t")
    assert (plan.context_tokens, plan.max_output_tokens) == (400, 100)  # half of 800, all 100
    assert plan.quality == pytest.approx(1.2)
    assert plan.actions == []  # it gives nothing up
    assert plan.attributes()["ragtime.plan.quality"] == 1.2
    # The same budget with curves that never rise above 1 keeps the whole context.
    full = policy(LINEAR).plan(60_000, k=4, rerank_available=False, target="t")
    assert (full.context_tokens, full.actions) == (800, [])


def test_a_context_the_budget_forces_below_the_full_quality_is_still_a_degradation() -> None:
    # Output cut short costs much; 1,700 ms fit all 100 tokens only with 200 context tokens
    # (50 + 2 x 300 + 990 = 1,640 ms), which keep 85%.
    table = QualityTable(
        {
            "context": LESS_IS_MORE.curves["context"],
            "output": [(0.0, 0.0), (0.9, 0.5), (1.0, 1.0)],
        }
    )
    plan = policy(table).plan(1_700, k=4, rerank_available=False, target="t")
    assert (plan.context_tokens, plan.max_output_tokens) == (200, 100)
    assert [(a.action, a.reason) for a in plan.actions] == [
        ("context_reduced", "200 of 800 tokens")
    ]


# -- a table per model ---------------------------------------------------------------------

PROFILES = QualityTable(
    {**LINEAR.curves, "rerank": [(0.0, 0.9), (1.0, 1.0)]},
    {"source": "default"},
    {MODEL: QualityTable({"context": LESS_IS_MORE.curves["context"]}, {"source": "smollm2"})},
)


def test_a_model_table_replaces_the_default_knob_by_knob() -> None:
    own = PROFILES.for_model(MODEL)
    assert own.curves["context"] == LESS_IS_MORE.curves["context"]
    assert own.curves["rerank"] == PROFILES.curves["rerank"]  # not measured for it: the default
    assert own.notes["source"] == "smollm2"
    assert PROFILES.for_model("another") is PROFILES
    assert PROFILES.for_model(None) is PROFILES


def test_a_target_gets_the_table_of_the_model_it_serves_and_an_unknown_one_the_default() -> None:
    assert PROFILES.for_target(f"llama.cpp:{MODEL}") is PROFILES.for_model(MODEL)
    assert PROFILES.for_target(MODEL) is PROFILES.for_model(MODEL)
    assert PROFILES.for_target("http://gpu:30000", MODEL) is PROFILES.for_model(MODEL)
    assert PROFILES.for_target("llama.cpp:Qwen2.5-0.5B-Instruct.Q4_K_M") is PROFILES
    assert PROFILES.for_target("http://gpu:30000") is PROFILES
    assert PROFILES.for_target("http://gpu:30000", "org/large") is PROFILES


def test_the_file_holds_the_default_and_each_model_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "quality.json"
    PROFILES.dump(path)
    assert QualityTable.load(path) == PROFILES
    LINEAR.dump(path)  # a table without models keeps the plain layout
    assert "models" not in path.read_text(encoding="utf-8")
    assert QualityTable.load(path) == LINEAR


def test_the_shipped_table_has_the_cpu_defaults_own_curves() -> None:
    """Keyed by the name the llama.cpp default's backend gives its model (built, not loaded)."""
    from inference.local.llamacpp import LlamaCppBackend

    backend = LlamaCppBackend()
    target = backend.cost_target("")
    assert backend.target_model(target) == MODEL
    shipped = QualityTable.load()
    assert shipped.for_target(target) is shipped.for_model(MODEL) is not shipped
    assert shipped.for_target("llama.cpp:some-other-model") is shipped


def engine() -> BudgetEngine:
    return BudgetEngine(LIMITS, PlanLimits(20, 0, 0, 0, 0, 0), quality=PROFILES, cost=costs())


def test_the_engine_plans_each_target_with_its_models_table() -> None:
    budget = engine()

    def context(target: str) -> int:
        plan = budget.plan_answer(BudgetLedger(60_000), k=4, rerank_available=False, target=target)
        return plan.context_tokens

    assert context(f"llama.cpp:{MODEL}") == 400
    assert context("llama.cpp:other") == 800
    assert context("http://gpu:30000") == 800  # a URL does not say its model ...
    budget.set_target_models(lambda target: MODEL if target == "http://gpu:30000" else None)
    assert context("http://gpu:30000") == 400  # ... the backend does
    assert context("http://cpu:30000") == 800
    quality = budget.plan_quality(
        BudgetLedger(60_000), spend_first_ms=0.0, k=4, rerank_available=False,
        target="http://gpu:30000",
    )  # fmt: skip
    assert quality == pytest.approx(1.2)


def test_the_budget_snapshot_shows_each_models_curves() -> None:
    snap = engine().snapshot()["quality"]
    assert isinstance(snap, dict)
    assert snap["models"][MODEL]["notes"] == {"source": "smollm2"}
