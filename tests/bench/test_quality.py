"""``ragtime bench quality``'s arithmetic: the measured points become the policy's table."""

from __future__ import annotations

from bench.suites.quality.measure import (
    KnobPoint,
    QualityResult,
    content_words,
    quality_table,
    table,
)


def result(**curves: list[KnobPoint]) -> QualityResult:
    return QualityResult(
        created="2026-12-04T00:00:00+00:00",
        command="ragtime bench quality --python-faq DATA",
        machine={},
        versions={},
        questions=3,
        context_tokens=384,
        max_output_tokens=192,
        full_score_mean=5.0,
        full_generate_ms_p50=3000.0,
        context=curves.get("context", [KnobPoint(share=0.5, quality=0.7, saved_ms_p50=600)]),
        output=curves.get("output", [KnobPoint(share=0.5, quality=0.8, saved_ms_p50=900)]),
        pruned=curves.get("pruned", []),
        measure="the FAQ answers' content words",
    )


def test_the_pruned_curve_is_capped_made_monotone_and_ends_at_the_whole_context() -> None:
    pruned = [
        KnobPoint(share=0.25, quality=0.8, saved_ms_p50=1000),
        KnobPoint(share=0.5, quality=1.07, saved_ms_p50=700),  # above the full plan: capped
        KnobPoint(share=0.75, quality=0.95, saved_ms_p50=350),  # a noisy dip: flattened
        KnobPoint(share=1.0, quality=0.98, saved_ms_p50=0),
    ]
    built = quality_table(result(pruned=pruned), [(0.0, 0.95), (1.0, 1.0)])
    assert built.curves["pruned"] == [(0.0, 0.0), (0.25, 0.8), (0.5, 1.0), (0.75, 1.0), (1.0, 1.0)]
    assert built.curves["context"] == [(0.0, 0.0), (0.5, 0.7), (1.0, 1.0)]
    assert built.notes["measure"] == "the FAQ answers' content words"
    assert built.weighs("pruned")


def test_without_a_pruned_measurement_the_table_does_not_weigh_pruning() -> None:
    assert not quality_table(result(), [(0.0, 0.95), (1.0, 1.0)]).weighs("pruned")


def test_the_table_lists_each_saving_with_what_it_keeps() -> None:
    pruned = [KnobPoint(share=0.5, quality=0.97, saved_ms_p50=700)]
    text = table(result(pruned=pruned))
    assert "| pruned | 50% | 97% | 700 | 0.004 |" in text
    assert "| context | 50% | 70% | 600 | 0.050 |" in text


def test_content_words_leave_out_short_and_stop_words() -> None:
    assert content_words("Use a default value with the lambda, then THE value.") == {
        "default",
        "value",
        "lambda",
    }


def test_a_case_of_a_labelled_set_is_scored_by_the_key_facts_it_holds() -> None:
    """``bench quality --answers``: the score is `ragtime eval answers`' key-fact rule, not
    the words shared with a reference (an answer that repeats the passage's words but not the
    fact scores nothing)."""
    from bench.suites.quality.measure import Case

    facts = [["immutable"], ["tuple(", "parentheses"]]
    labelled = Case("list vs tuple?", [], {"tuples", "lists", "sequence"}, [], facts)
    assert labelled.score("Tuples are immutable; write them in parentheses.") == 2.0
    assert labelled.score("Tuples and lists are both sequence types.") == 0.0
    plain = Case("list vs tuple?", [], {"tuples", "lists", "sequence"}, [])
    assert plain.score("Tuples and lists are both sequence types.") == 3.0
