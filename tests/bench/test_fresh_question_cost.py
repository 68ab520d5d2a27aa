"""The fresh-question study reads the floor's ceiling and its CPU there from a ceiling JSON."""

from __future__ import annotations

import json
from pathlib import Path

from bench.studies.fresh_question_cost import cpu_ms, floor_at_ceiling


def phase(rate: float, cpu: float) -> dict[str, float]:
    return {"rate": rate, "server_cpu_ms": cpu}


def test_the_floors_cpu_is_read_at_each_runs_own_ceiling(tmp_path: Path) -> None:
    runs = [
        {"floor": {"ceiling": {"ceiling_rps": 200.0},
                   "phases": [phase(10, 2.0), phase(200, 1.2), phase(250, 1.1)]}},
        {"floor": {"ceiling": {"ceiling_rps": 300.0},
                   "phases": [phase(10, 2.5), phase(200, 1.0), phase(300, 0.8)]}},
        {"floor": {"ceiling": {"ceiling_rps": 150.0},
                   "phases": [phase(10, 3.0), phase(150, 1.4)]}},
    ]  # fmt: skip
    path = tmp_path / "ceiling.json"
    path.write_text(json.dumps({"runs": runs}))
    assert floor_at_ceiling(path) == (200.0, 1.2)


def test_cpu_time_is_the_median_over_new_inputs() -> None:
    seen: list[int] = []
    assert cpu_ms(seen.append, repeats=3) >= 0.0
    assert seen == [-1, -2, -3, -4, -5, 0, 1, 2]  # five to warm up, then each timed once
