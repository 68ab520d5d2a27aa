"""``ragtime bench quality``'s arithmetic: the measured points become the policy's table."""

from __future__ import annotations

from pathlib import Path

from bench.suites.quality.measure import KnobPoint, QualityResult, content_words
from bench.suites.quality.tables import quality_table, table


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


def test_the_measured_models_own_curves_are_kept_as_measured() -> None:
    """The default table caps and flattens; the model's own keeps a share that answered
    better than the full plan (above 1) and a dip, and each knob's full setting as 1."""
    context = [
        KnobPoint(share=0.25, quality=0.85, saved_ms_p50=1300, better=1, worse=4),
        KnobPoint(share=0.5, quality=1.22, saved_ms_p50=870, better=6, worse=2),
        KnobPoint(share=0.75, quality=0.95, saved_ms_p50=500, better=2, worse=3),
    ]
    pruned = [
        KnobPoint(share=0.25, quality=1.04, saved_ms_p50=1280),
        KnobPoint(share=1.0, quality=0.78, saved_ms_p50=-30),
    ]
    measured = result(context=context, pruned=pruned).model_copy(
        update={"model": "SmolLM2-135M-Instruct.Q4_1"}
    )
    built = quality_table(measured, [(0.0, 0.95), (1.0, 1.0)])
    assert built.curves["context"] == [
        (0.0, 0.0), (0.25, 0.85), (0.5, 1.0), (0.75, 1.0), (1.0, 1.0)
    ]  # fmt: skip
    own = built.models["SmolLM2-135M-Instruct.Q4_1"]
    assert own.curves["context"] == [
        (0.0, 0.0), (0.25, 0.85), (0.5, 1.22), (0.75, 0.95), (1.0, 1.0)
    ]  # fmt: skip
    assert own.curves["pruned"] == [(0.0, 0.0), (0.25, 1.04), (1.0, 0.78)]
    assert own.notes["model"] == "SmolLM2-135M-Instruct.Q4_1"
    assert own.notes["paired"]["context"]["0.5"] == "6 better, 2 worse than the full plan"
    served = built.for_target("llama.cpp:SmolLM2-135M-Instruct.Q4_1")
    assert served.quality("context", 0.5) == 1.22
    assert served.curves["rerank"] == [(0.0, 0.95), (1.0, 1.0)]  # the default's
    assert "| context | 50% | 122% | 870 | -0.025 | 6 / 2 |" in table(measured)


def test_a_measurement_without_a_model_adds_no_models_table() -> None:
    assert quality_table(result(), [(0.0, 0.95), (1.0, 1.0)]).models == {}


def test_from_json_writes_the_models_table_and_keeps_the_default(tmp_path: Path) -> None:
    """``--from-json F --table T --model-only``: the measured model's curves go into T's
    ``models``; T's default curves, and its other models, stay as they were."""
    import argparse

    from bench.suites.quality.command import run
    from tracing.budget import QualityTable

    context = [KnobPoint(share=0.5, quality=1.2, saved_ms_p50=870, better=5, worse=1)]
    saved = tmp_path / "quality-run.json"
    saved.write_text(
        result(context=context).model_copy(update={"model": "m"}).model_dump_json(),
        encoding="utf-8",
    )
    path = tmp_path / "quality.json"
    other = QualityTable({"output": [(0.0, 0.5), (1.0, 1.0)]})
    QualityTable({"context": [(0.0, 0.3), (1.0, 1.0)]}, {"source": "before"}, {"x": other}).dump(
        path
    )
    args = argparse.Namespace(from_json=saved, table=path, json=None, model_only=True)
    assert run(args) == 0
    written = QualityTable.load(path)
    assert written.curves == {"context": [(0.0, 0.3), (1.0, 1.0)]}
    assert written.notes == {"source": "before"}
    assert written.models["x"] == other
    assert written.for_model("m").quality("context", 0.5) == 1.2
