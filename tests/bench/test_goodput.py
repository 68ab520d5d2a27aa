"""Goodput: what counts as useful, the repeat mix, and the three targets."""

from __future__ import annotations

from bench.harness.client import RequestRecord
from bench.harness.outcomes import is_useful, is_within
from bench.sglang_sim.process import spec_args
from bench.suites.budget.goodput import (
    GoodputResult,
    repeat_mix,
    summarize_cell,
    table,
    verdicts,
)


def record(status: int = 200, words: int = 10, e2e: float = 500.0, **kw: object) -> RequestRecord:
    outcome = "ok" if status == 200 else "http_error"
    return RequestRecord(
        target="t", index=0, scheduled_s=0.0, start_lag_ms=0.0, status=status,
        outcome=outcome, e2e_ms=e2e, budget_ms=1000.0, answer_words=words,
        budget_exceeded=False if status == 200 else None,
        error="deadline_exceeded: the budget cannot be met" if status == 504 else None,
        **kw,
    )  # fmt: skip


def test_useful_means_a_few_words_within_budget() -> None:
    assert is_useful(record())
    assert not is_useful(record(words=2))  # an answer of two words is not an answer
    assert not is_useful(record(e2e=1500.0))  # late
    assert not is_useful(record(status=504, words=0))  # refused, however fast
    assert is_within(record(status=504, words=0, e2e=30.0))
    assert not is_within(record(status=502, words=0, e2e=30.0))


def test_a_cell_counts_refusals_apart_from_answers() -> None:
    cell = summarize_cell(
        [record(), record(), record(status=504, words=0, e2e=30.0), record(words=1)],
        server="s", phase="before", multiple=0.5, budget_ms=1000, users=1, smallest_ms=400.0,
    )  # fmt: skip
    assert (cell.within, cell.useful, cell.refused) == (4, 2, 1)  # a fast 504 held the budget
    assert cell.useful_ratio == 0.5 and cell.refused_ratio == 0.25
    assert cell.smallest_plan_fits
    assert "**50%**" in table([cell])


def test_repeat_mix_repeats_about_the_share_asked() -> None:
    questions = [f"q{i}" for i in range(30)]
    mix = repeat_mix(questions, 200, repeat_share=0.3, seed=1)
    repeats = sum(1 for i, q in enumerate(mix) if q in mix[max(0, i - 4) : i])
    assert len(mix) == 200 and 40 <= repeats <= 80
    assert mix == repeat_mix(questions, 200, repeat_share=0.3, seed=1)


def test_the_targets_compare_after_cache_hits_with_before() -> None:
    def cell(phase: str, useful: int) -> object:
        records = [record() for _ in range(useful)] + [record(words=0)] * (4 - useful)
        return summarize_cell(
            records, server="s", phase=phase, multiple=1.0,  # type: ignore[arg-type]
            budget_ms=1000, users=1, smallest_ms=100.0,
        )  # fmt: skip

    result = GoodputResult(
        created="", command="", machine={}, versions={}, multiples=[1.0], repeat_share=0.3,
        cache_hits=50, servers=[], cells=[cell("before", 4), cell("after_cache_hits", 3)],
    )  # fmt: skip
    met = verdicts(result)
    assert met["within_99"] and not met["no_worse_after_hits"]
    assert not met["useful_95_where_feasible"]


def test_fake_sglang_spec_becomes_its_command_line() -> None:
    assert spec_args("fixed_ms=30, max_running=8") == ["--fixed-ms", "30", "--max-running", "8"]
