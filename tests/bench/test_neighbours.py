"""``ragtime bench neighbours``: how its rows count answers, its section of BENCHMARKS.md, and one
short run against a real ragtime on the null backend beside a CPU-bound process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.commands import main
from bench.harness.client import RequestRecord
from bench.report.neighbours_md import BEGIN, END, read_neighbours_json, write_section
from bench.suites.neighbours import report, summarise, without_key
from tests.helpers.bench_results import null_config


def record(status: int = 200, *, e2e_ms: float = 1000.0, **fields: object) -> RequestRecord:
    values: dict[str, object] = {
        "target": "ragtime", "index": 0, "scheduled_s": 0.0, "start_lag_ms": 0.0,
        "status": status, "outcome": "ok" if status == 200 else "http_error", "e2e_ms": e2e_ms,
        "budget_ms": 6000, "answer_words": 40, "finish_reason": "length",
        "completion_tokens": 192, "ttft_ms": 500.0, "budget_exceeded": False,
    }  # fmt: skip
    values.update(fields)
    return RequestRecord.model_validate(values)


def test_a_row_counts_whole_cut_late_refused_and_over_budget_answers() -> None:
    records = [
        record(),
        record(finish_reason="stop", degradations=["generate:output_cap"]),
        record(finish_reason="deadline", completion_tokens=8),  # useful, but cut
        record(504, error="deadline_exceeded: no answer token came before the deadline"),
        record(503, error="overloaded"),
        record(e2e_ms=6500.0, budget_exceeded=True),  # an answer past its budget is not useful
    ]
    row = summarise("neighbours", 6000, records)
    assert (row["asked"], row["useful"], row["whole"], row["cut"]) == (6, 3, 2, 1)
    assert (row["late_504"], row["refused_at_door"], row["over_budget"]) == (1, 1, 1)
    assert row["degraded"] == 1 and row["ttft_p50_ms"] == 500.0


def test_the_command_shown_never_holds_the_key() -> None:
    argv = ["bench", "neighbours", "--url", "http://x", "--key", "rt_secret", "--key=rt_other"]
    shown = without_key(argv)
    assert "rt_secret" not in " ".join(shown) and "rt_other" not in " ".join(shown)
    assert shown[:4] == argv[:4]


def result(useful: int) -> dict[str, object]:
    rows = [summarise("neighbours", 30000, [record()] * useful)]
    return {"command": "ragtime bench neighbours --serve x.env", "burners": 2, "rows": rows}


def test_the_section_goes_before_the_reading_notes_and_is_replaced_in_place(
    tmp_path: Path,
) -> None:
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# ragtime benchmarks\n\n## Reading these numbers\n\n- notes\n")
    write_section(out, result(3))
    write_section(out, result(4))
    text = out.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert text.index(END) < text.index("## Reading these numbers")
    assert "| neighbours | 30 s | 4 | 4 | 4 |" in text and report(result(4)) in text


def test_the_section_command_reads_the_json_and_refuses_other_files(tmp_path: Path) -> None:
    path, out = tmp_path / "neighbours.json", tmp_path / "BENCHMARKS.md"
    path.write_text(json.dumps(result(2)))
    assert main(["bench", "section", "--neighbours", str(path), "--out", str(out)]) == 0
    assert "| neighbours | 30 s | 2 | 2 | 2 |" in out.read_text()
    (tmp_path / "other.json").write_text("[]")
    with pytest.raises(ValueError, match="not a `ragtime bench neighbours` result"):
        read_neighbours_json(tmp_path / "other.json")


@pytest.mark.slow
def test_a_short_run_beside_a_cpu_bound_process(
    minilm_data_dir: Path, minilm_api_key: str, tmp_path: Path
) -> None:
    config = null_config(tmp_path, minilm_data_dir, minilm_api_key)
    out = tmp_path / "run.json"
    argv = [
        "bench", "neighbours", "--serve", str(config), "--burners", "1", "--budgets", "20000",
        "--questions", "3", "--warm", "1", "--json", str(out), "--log-dir", str(tmp_path),
    ]  # fmt: skip
    assert main(argv) == 0
    run = read_neighbours_json(out)
    assert [(r["condition"], r["budget_ms"], r["asked"]) for r in run["rows"]] == [
        ("neighbours", 20000, 3),
        ("quiet", 20000, 3),
    ]
    assert all(r["useful"] == r["whole"] == 3 for r in run["rows"])
    assert len(run["records"]) == 6 and minilm_api_key not in out.read_text()
