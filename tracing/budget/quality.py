"""What each saving costs in answer quality: measured curves the policy weighs milliseconds by.

A ``QualityTable`` holds, per knob of a plan, the quality kept (1.0 = the full plan's answer) at
a fraction of that knob's full setting:

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
qualities. ``ragtime bench quality`` measures the curves on the demo corpus and writes them to
``quality.json`` beside this module, which is the default table; ``RAGTIME_BUDGET_QUALITY_PATH``
names another.
"""

from __future__ import annotations

import bisect
import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_QUALITY_PATH = Path(__file__).with_name("quality.json")
KNOBS = ("context", "output", "rerank", "pruned", "keyword")
#: (knob, fraction) pairs whose quality a table keeps computed.
QUALITY_CACHE = 4096


@dataclass(frozen=True)
class QualityTable:
    curves: Mapping[str, Sequence[tuple[float, float]]]
    """Per knob, ``(fraction, quality)`` points sorted by fraction, ending at ``(1.0, 1.0)``."""
    notes: Mapping[str, Any] = field(default_factory=dict)
    _known: Callable[[str, float], float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for knob, points in self.curves.items():
            if knob not in KNOBS:
                raise ValueError(f"unknown knob {knob!r}; known: {', '.join(KNOBS)}")
            if not points or any(not (0.0 <= f <= 1.0 and 0.0 <= q <= 1.0) for f, q in points):
                raise ValueError(f"{knob}: points must be (fraction, quality) pairs in [0, 1]")
            if list(points) != sorted(points):
                raise ValueError(f"{knob}: points must be sorted by fraction")
        # The planner weighs some 150 (knob, fraction) pairs a request, from a few dozen values.
        known = functools.lru_cache(maxsize=QUALITY_CACHE)(self._quality)
        object.__setattr__(self, "_known", known)

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

    def plan_quality(
        self, *, context: float, output: float, rerank: float, pruned: bool = False
    ) -> float:
        return (
            self.quality("pruned" if pruned else "context", context)
            * self.quality("output", output)
            * self.quality("rerank", rerank)
        )

    @classmethod
    def load(cls, path: Path = DEFAULT_QUALITY_PATH) -> QualityTable:
        data = json.loads(path.read_text(encoding="utf-8"))
        curves = {
            knob: [(float(f), float(q)) for f, q in points]
            for knob, points in data.get("curves", {}).items()
        }
        return cls(curves, data.get("notes", {}))

    def dump(self, path: Path) -> None:
        data = {
            "curves": {knob: [list(p) for p in points] for knob, points in self.curves.items()},
            "notes": dict(self.notes),
        }
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
