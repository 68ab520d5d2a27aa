"""What each saving costs in answer quality: measured curves the policy weighs milliseconds by.

A ``QualityTable`` holds, per knob of a plan, the quality kept at a fraction of that knob's full
setting, relative to the full setting's answer: 1.0 at the full setting (the reference point,
``(1.0, 1.0)``, which every curve ends at), below 1 where a smaller setting answers worse, above
1 where it answers better (a small model that keeps more of an answer's key facts with less to
read). The knobs:

* ``context``: the share of the configured context tokens the prompt may hold;
* ``output``: the share of the configured output tokens the answer may have;
* ``rerank``: the share of the configured rerank candidates scored (0 = vector order);
* ``keyword``: 1 when hybrid search fuses the keyword (BM25) ranking in, 0 when the dense
  order stands alone (only a short query that holds an exact term or is not a question runs
  the keyword side at all);
* ``pruned``: the share of the configured context tokens, filled with each passage's sentences
  closest to the question (``inference.prompt``'s pruning) instead of the first passages whole.
  It replaces ``context`` in a pruned plan; without it, no plan is pruned.

Between measured points the curve is linear. The quality of a plan is the product of its knobs'
qualities.

**Per model** (``models``): the curves are the served model's. A table may hold, beside its own
(the default, for a model nobody measured), a table per model name (``GenerationBackend.model``:
``SmolLM2-135M-Instruct.Q4_1`` for the llama.cpp default), whose curves replace the default's
knob by knob. ``for_target`` picks the table of the model a target serves.

``ragtime bench quality`` measures the curves on the demo corpus and writes them to
``quality.json`` beside this module, which is the default table; ``RAGTIME_BUDGET_QUALITY_PATH``
names another (either layout: a plain table, or one with ``models``).
"""

from __future__ import annotations

import bisect
import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_QUALITY_PATH = Path(__file__).with_name("quality.json")
KNOBS = ("context", "output", "rerank", "pruned", "keyword")
#: (knob, fraction) pairs whose quality a table keeps computed.
QUALITY_CACHE = 4096
#: The full setting of every knob, whose answer every quality is relative to.
REFERENCE = (1.0, 1.0)


@dataclass(frozen=True)
class QualityTable:
    curves: Mapping[str, Sequence[tuple[float, float]]]
    """Per knob, ``(fraction, quality)`` points sorted by fraction, ending at ``(1.0, 1.0)``
    (``pruned`` at fraction 1.0 and what the whole context pruned keeps: its reference is the
    whole context unpruned); fractions in [0, 1], qualities finite and at least 0 (above 1:
    better than the full setting)."""
    notes: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, QualityTable] = field(default_factory=dict)
    """Per served model, its own curves (and notes): each replaces this table's for its knobs.
    A model's table holds no models of its own."""
    _known: Callable[[str, float], float] = field(init=False, repr=False, compare=False)
    _merged: Mapping[str, QualityTable] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for knob, points in self.curves.items():
            _check_curve(knob, points)
        for model, table in self.models.items():
            if table.models:
                raise ValueError(f"model {model!r}: a model's table holds no models")
        # The planner weighs some 50 (knob, fraction) pairs a plan, from a few dozen values.
        known = functools.lru_cache(maxsize=QUALITY_CACHE)(self._quality)
        object.__setattr__(self, "_known", known)
        merged = {
            model: QualityTable({**self.curves, **table.curves}, {**self.notes, **table.notes})
            for model, table in self.models.items()
        }
        object.__setattr__(self, "_merged", merged)

    def quality(self, knob: str, fraction: float) -> float:
        """Quality kept at ``fraction`` of the knob's full setting (1.0 for an unknown knob)."""
        return self._known(knob, fraction)

    def _quality(self, knob: str, fraction: float) -> float:
        points = self.curves.get(knob)
        if not points:
            return 1.0
        fraction = min(max(fraction, 0.0), 1.0)
        xs = [f for f, _ in points]
        i = bisect.bisect_left(xs, fraction)
        if i == 0:
            return points[0][1] if fraction <= xs[0] else 1.0
        if i == len(points):
            return points[-1][1]
        (f0, q0), (f1, q1) = points[i - 1], points[i]
        return q0 + (q1 - q0) * (fraction - f0) / (f1 - f0) if f1 > f0 else q1

    def weighs(self, knob: str) -> bool:
        """Whether the table has a curve for ``knob``."""
        return bool(self.curves.get(knob))

    def better_than_full(self, knob: str, fraction: float) -> bool:
        """Whether ``fraction`` of the knob answers better than its full setting: a setting
        chosen for that saves nothing of the answer."""
        return self.quality(knob, fraction) > REFERENCE[1]

    def plan_quality(
        self, *, context: float, output: float, rerank: float, pruned: bool = False
    ) -> float:
        return (
            self.quality("pruned" if pruned else "context", context)
            * self.quality("output", output)
            * self.quality("rerank", rerank)
        )

    def ceiling(self) -> float:
        """The most quality any plan can keep (``plan_quality`` at each knob's best point):
        1.0 unless a curve rises above its full setting."""

        def best(knob: str) -> float:
            return max((q for _, q in self.curves.get(knob, ())), default=1.0)

        context = max(best("context"), best("pruned"))
        return max(context, 1.0) * max(best("output"), 1.0) * max(best("rerank"), 1.0)

    def for_model(self, model: str | None) -> QualityTable:
        """The table for ``model``: its own curves over this table's; this one for a model it
        has none for (or None)."""
        if model is None:
            return self
        return self._merged.get(model, self)

    def for_target(self, target: str, model: str | None = None) -> QualityTable:
        """The table for the model ``target`` serves: ``model`` where the caller knows it
        (and has a table); else the model the target's name ends with (a backend's target is
        ``backend:model``, ``GenerationBackend.cost_target``); else the default (this one)."""
        if model is not None and model in self._merged:
            return self._merged[model]
        for name, table in self._merged.items():
            if target == name or target.endswith((f":{name}", f"/{name}")):
                return table
        return self

    @classmethod
    def load(cls, path: Path = DEFAULT_QUALITY_PATH) -> QualityTable:
        data = json.loads(path.read_text(encoding="utf-8"))
        models = {name: cls._parsed(table) for name, table in data.get("models", {}).items()}
        return cls._parsed(data, models)

    @classmethod
    def _parsed(
        cls, data: Mapping[str, Any], models: Mapping[str, QualityTable] | None = None
    ) -> QualityTable:
        curves = {
            knob: [(float(f), float(q)) for f, q in points]
            for knob, points in data.get("curves", {}).items()
        }
        return cls(curves, data.get("notes", {}), models or {})

    def as_json(self) -> dict[str, Any]:
        """The table as its file holds it (``models`` only where it has some)."""
        data: dict[str, Any] = {
            "curves": {knob: [list(p) for p in points] for knob, points in self.curves.items()},
            "notes": dict(self.notes),
        }
        if self.models:
            data["models"] = {name: table.as_json() for name, table in self.models.items()}
        return data

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(self.as_json(), indent=2) + "\n", encoding="utf-8")


def _check_curve(knob: str, points: Sequence[tuple[float, float]]) -> None:
    if knob not in KNOBS:
        raise ValueError(f"unknown knob {knob!r}; known: {', '.join(KNOBS)}")
    if not points or any(
        not (0.0 <= f <= 1.0 and math.isfinite(q) and q >= 0.0) for f, q in points
    ):
        raise ValueError(
            f"{knob}: points must be (fraction, quality) pairs, fractions in [0, 1] and "
            "qualities finite and at least 0"
        )
    if list(points) != sorted(points):
        raise ValueError(f"{knob}: points must be sorted by fraction")
    last_fraction, last_quality = points[-1]
    if last_fraction != 1.0 or (knob != "pruned" and last_quality != REFERENCE[1]):
        raise ValueError(f"{knob}: the curve must end at the full setting, {REFERENCE}")
