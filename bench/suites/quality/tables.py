"""``ragtime bench quality``'s measurement as the policy's ``QualityTable``, and as Markdown.

One measurement gives two tables (``quality_table``):

* the **default** (for a model nobody measured): each curve capped at 1 and made monotone, so
  that a noisy dip is flattened and no saving is taken for answering better. What one model did
  with less context is no promise for another;
* the **measured model's own** (``model_table``, under ``models`` by the served model's name):
  the points as measured, above 1 where the model answered better with less, and each knob's
  full setting as the reference, ``(1.0, 1.0)``. The planner then cuts the context where that
  model answers better with less (``tracing.budget.policy``).
"""

from __future__ import annotations

from collections.abc import Sequence

from bench.suites.quality.measure import KnobPoint, QualityResult
from tracing.budget import QualityTable

RERANK_NOTE = "assumed, not measured: no cross-encoder ships offline"


def quality_table(
    result: QualityResult,
    rerank: Sequence[tuple[float, float]],
    kept: QualityTable | None = None,
) -> QualityTable:
    """The measured context and output curves, and the assumed rerank one, as the policy's
    default ``QualityTable`` (validated as it is built; ``dump`` writes its file); the
    ``keyword`` curve and its note carried from ``kept`` (measured by ``ragtime eval
    retrieval``), and its models' tables, the measured model's replaced by ``model_table``."""

    def points(knob: list[KnobPoint]) -> list[tuple[float, float]]:
        measured = {p.share: min(p.quality, 1.0) for p in knob}
        measured.setdefault(1.0, 1.0)
        return _monotone([(0.0, 0.0), *sorted(measured.items())])

    curves = {"context": points(result.context), "output": points(result.output), "rerank": rerank}
    if result.pruned:
        curves["pruned"] = points(result.pruned)
    notes = {**_notes(result), "rerank": RERANK_NOTE}
    if kept is not None and "keyword" in kept.curves:
        curves["keyword"] = list(kept.curves["keyword"])
        if "keyword" in kept.notes:
            notes["keyword"] = kept.notes["keyword"]
    models = dict(kept.models) if kept is not None else {}
    if result.model:
        models[result.model] = model_table(result)
    return QualityTable(curves, notes, models)


def model_table(result: QualityResult) -> QualityTable:
    """The measured model's own curves, as measured: not capped, not made monotone (a point
    above 1 is a share that kept more than the full plan). Context and output end at their
    full setting, ``(1.0, 1.0)``; pruning at what the whole context pruned kept."""

    def points(knob: list[KnobPoint]) -> list[tuple[float, float]]:
        measured = {p.share: round(p.quality, 4) for p in knob}
        measured[1.0] = measured.get(1.0, 1.0)
        return [(0.0, 0.0), *sorted(measured.items())]

    curves = {"context": points(result.context), "output": points(result.output)}
    if result.pruned:
        curves["pruned"] = points(result.pruned)
    notes = {
        **_notes(result),
        "as measured": "not capped at 1 nor made monotone: above 1, a share kept more key "
        "facts than the full plan, and the planner takes it for that",
        "paired": {
            knob: {
                f"{p.share:g}": f"{p.better} better, {p.worse} worse than the full plan"
                for p in knob_points
            }
            for knob, knob_points in (("context", result.context), ("pruned", result.pruned))
            if knob_points
        },
    }
    return QualityTable(curves, notes)


def _notes(result: QualityResult) -> dict[str, object]:
    notes: dict[str, object] = {
        "source": f"ragtime bench quality, {result.created}: {result.command}",
        "measure": result.measure,
        "questions": result.questions,
    }
    if result.model:
        notes["model"] = result.model
    return notes


def _monotone(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Quality never falls as a knob grows: a noisy dip is flattened, not trusted."""
    best = 0.0
    out = []
    for share, quality in points:
        best = max(best, quality)
        out.append((share, round(best, 4)))
    return out


def table(result: QualityResult) -> str:
    rows = [
        "| saving | share kept | quality kept | ms saved (median) | quality lost per 100 ms "
        "| questions better / worse |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for knob, points in (
        ("context", result.context),
        ("pruned", result.pruned),
        ("output", result.output),
    ):
        for p in points:
            per = (1 - p.quality) / p.saved_ms_p50 * 100 if p.saved_ms_p50 > 0 else float("nan")
            rows.append(
                f"| {knob} | {p.share:.0%} | {p.quality:.0%} | {p.saved_ms_p50:.0f} | {per:.3f} "
                f"| {p.better} / {p.worse} |"
            )
    return "\n".join(rows)
