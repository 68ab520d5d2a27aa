"""``ragtime bench budget --fresh-starts``: the row's arithmetic and its block of BENCHMARKS.md
(no server starts here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.commands import main
from bench.harness.client import RequestRecord
from bench.report.budget_md import BEGIN as BUDGET_BEGIN
from bench.report.fresh_md import BEGIN, END, section, write_section
from bench.suites.budget.fresh import (
    FRESH_ORDER,
    FreshResult,
    FreshStart,
    fresh_questions,
    fresh_server,
    read_fresh_json,
    tally,
    text_report,
    why_not_useful,
    write_fresh_json,
)


def rec(
    i: int = 0,
    *,
    status: int = 200,
    words: int = 12,
    e2e: float = 900.0,
    outcome: str | None = None,
    error: str | None = None,
) -> RequestRecord:
    ok = status == 200 and outcome in (None, "ok")
    return RequestRecord(
        target="t", index=i, scheduled_s=0.0, start_lag_ms=0.0, status=status,
        outcome=outcome or ("ok" if status == 200 else "http_error"), error=error,
        ttft_ms=e2e / 3 if ok else None, e2e_ms=e2e, budget_ms=2500.0,
        answer_words=words if ok else 0, budget_exceeded=(e2e > 2500.0) if ok else None,
    )  # fmt: skip


def refused(i: int = 0, e2e: float = 40.0) -> RequestRecord:
    return rec(i, status=504, e2e=e2e, error="deadline_exceeded: the budget cannot be met")


def start(n: int, records: list[RequestRecord], server: str = "cpu-default") -> FreshStart:
    return FreshStart(server=server, start=n, ready_s=8.0 + n, tally=tally(records),
                      records=records)  # fmt: skip


def result() -> FreshResult:
    cpu = [
        start(1, [refused(0), rec(1, words=2)] + [rec(i) for i in range(2, 10)]),
        start(2, [rec(i) for i in range(10)]),
        start(3, [rec(0, e2e=2600.0), rec(1, status=503, error="overloaded: busy")]
              + [rec(i) for i in range(2, 10)]),
    ]  # fmt: skip
    sim = [start(n, [rec(i, e2e=500.0) for i in range(10)], "budget-sglang") for n in (1, 2, 3)]
    return FreshResult(
        created="2026-12-04T00:00:00+00:00",
        command="ragtime bench budget --fresh-starts 3 --budget-ms 2500",
        machine={"cores": 2, "loadavg_at_start": [1.0, 1.0, 1.0]},
        versions={},
        budget_ms=2500,
        order=list(FRESH_ORDER),
        questions=[f"q{n}" for n in FRESH_ORDER],
        servers=[
            fresh_server("cpu-default", "benchmarks/cpu-default.env",
                         {"RAGTIME_DATA_DIR": "d"}, cpu),
            fresh_server("budget-sglang", "benchmarks/budget-sglang.env",
                         {"RAGTIME_SGLANG_ENDPOINTS": '["http://x"]'}, sim),
        ],
    )  # fmt: skip


def test_the_questions_follow_the_order_with_its_repeats() -> None:
    questions = [f"q{n}" for n in range(1, 9)]
    asked = fresh_questions(questions, FRESH_ORDER)
    assert len(asked) == 10 and asked[:3] == ["q1", "q2", "q1"] and asked[5] == "q2"
    with pytest.raises(ValueError, match="outside"):
        fresh_questions(questions[:7], FRESH_ORDER)  # question 8 is missing


def test_a_tally_counts_useful_within_504_and_other_statuses() -> None:
    records = [
        rec(0),
        rec(1, words=2),  # within, answered, too short to be useful
        rec(2, e2e=2600.0),  # answered late
        refused(3),  # within, not useful
        rec(4, status=503, error="overloaded: busy"),
        rec(5, status=0, outcome="transport_error", e2e=10.0),
        rec(6, outcome="stream_error", error="internal: boom"),
    ]
    t = tally(records)
    assert (t.requests, t.useful, t.within, t.answered, t.refused) == (7, 1, 3, 3, 1)
    assert t.other == {"503": 1, "error event": 1, "no response": 1}
    assert t.useful_ratio == round(1 / 7, 4)
    assert t.e2e_ms.n == 7 and t.ttft_ms.n == 3
    assert why_not_useful(records[0]) is None
    assert why_not_useful(records[1]) == "2 words in 900 ms"
    assert why_not_useful(records[2]) == "answered late, 2600 ms"
    assert why_not_useful(records[3]) == "504 after 40 ms"
    assert why_not_useful(records[4]) == "503 after 900 ms (overloaded: busy)"


def test_the_row_totals_the_starts() -> None:
    r = result()
    cpu, sim = r.servers
    assert sim.total.useful == 30
    assert (cpu.total.requests, cpu.total.useful, cpu.total.refused) == (30, 26, 1)
    assert cpu.total.within == 28  # the late answer and the 503 are not within
    text = text_report(r)
    row = next(line for line in text.splitlines() if line.startswith("| fresh process"))
    assert row.startswith("| fresh process: first 10 requests at 2.5 s, useful % | cpu-default")
    assert "**87%** (26 of 30) | 8/10, 10/10, 8/10 | 28 of 30 | 1 | 503: 1 |" in row
    assert "CPU default" in row and "9.0, 10.0, 11.0" in row
    assert "**100%** (30 of 30)" in text and "simulated SGLang" in text
    assert "1: 504 after 40 ms; 2: 2 words in 900 ms" in text


def test_the_block_goes_before_the_reading_notes_and_is_replaced_in_place(
    tmp_path: Path,
) -> None:
    out = tmp_path / "BENCHMARKS.md"
    budget_block = f"{BUDGET_BEGIN}\n## 6. budget\n<!-- /budget-engine -->"
    out.write_text(f"# b\n\n{budget_block}\n\n## Reading these numbers\n\n- x\n")
    r = result()
    write_section(out, r)
    first = out.read_text()
    assert first.index(budget_block) < first.index(BEGIN) < first.index("## Reading")
    assert "## 7. A fresh process: its first 10 requests at 2.5 s" in first
    assert f"`{r.command}`" in first and section(r).endswith(END)
    r.notes = ["A note."]
    write_section(out, r)
    second = out.read_text()
    assert second.count(BEGIN) == 1 and "A note." in second and budget_block in second


def test_json_round_trip_and_the_section_command(tmp_path: Path) -> None:
    path, out = tmp_path / "fresh.json", tmp_path / "BENCHMARKS.md"
    write_fresh_json(result(), path)
    assert read_fresh_json(path).servers[0].total.useful == 26
    out.write_text("# b\n\n## Reading these numbers\n")
    assert main(["bench", "section", "--fresh", str(path), "--out", str(out)]) == 0
    text = out.read_text()
    assert BEGIN in text and BUDGET_BEGIN not in text  # alone, only its own block


def test_the_fresh_mode_needs_a_budget(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "budget", "--serve", "x.env", "--fresh-starts", "3"]
    assert main(argv) == 2
    assert "--budget-ms" in capsys.readouterr().err
