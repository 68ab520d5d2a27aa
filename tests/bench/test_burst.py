"""``ragtime bench burst``'s arithmetic: what counts as answered, refused or late, the server's
refusal p99 from its histogram, the verdict against issue 22's targets, and its section."""

from __future__ import annotations

import pytest

from bench.harness.client import RequestRecord
from bench.report.burst_md import section, why_missed
from bench.suites.burst.loads import LOOP_LAG, REFUSALS, bucket_p99_ms, histogram_buckets
from bench.suites.burst.results import (
    BurstBench,
    classify,
    judge_burst,
    parse_bursts,
    summarize_burst,
)


def record(
    status: int,
    e2e_ms: float,
    *,
    sent_ms: float = 0.0,
    outcome: str = "ok",
    body_sent_ms: float | None = None,
) -> RequestRecord:
    return RequestRecord(
        target="t", index=0, scheduled_s=0.0, start_lag_ms=0.0, status=status,
        outcome=outcome if status == 200 else "http_error", e2e_ms=e2e_ms, sent_ms=sent_ms,
        body_sent_ms=body_sent_ms, budget_ms=1000,
    )  # fmt: skip


def test_bursts_are_size_at_budget() -> None:
    assert parse_bursts("25@1, 100@1,200@2") == [(25, 1.0), (100, 1.0), (200, 2.0)]
    with pytest.raises(ValueError, match="SIZE@BUDGET_S"):
        parse_bursts("25")


def test_what_each_response_counts_as() -> None:
    assert classify(record(200, 900.0)) == "answered"
    assert classify(record(200, 900.0, outcome="stream_error")) == "error"
    assert classify(record(503, 5.0)) == "refused"
    assert classify(record(504, 20.0)) == "504"
    assert classify(record(200, 1001.0)) == "late"
    assert classify(record(503, 1200.0)) == "late"  # a refusal past the budget is late too
    assert classify(record(500, 10.0)) == "error"


def test_late_on_the_wire_counts_from_when_the_client_wrote_the_request() -> None:
    records = [record(200, 1100.0, sent_ms=300.0), record(200, 1400.0, sent_ms=300.0)]
    summary = summarize_burst(records, wall_s=1.4)
    assert summary.late == 2 and summary.late_on_wire == 1
    assert summary.sent_ms_p50 == 300.0


def test_the_servers_refusal_p99_is_the_bound_of_the_bucket_that_holds_it() -> None:
    before = {0.005: 10.0, 0.01: 10.0, 0.05: 10.0, float("inf"): 10.0}
    after = {0.005: 90.0, 0.01: 109.0, 0.05: 110.0, float("inf"): 110.0}
    assert bucket_p99_ms(before, after) == pytest.approx(10.0)  # 99 of 100 within 10 ms
    assert bucket_p99_ms(after, after) is None  # no refusal in between


def test_the_histograms_are_read_from_the_servers_metrics() -> None:
    text = (
        "# HELP ragtime_admission_refusal_seconds How long a refusal took.\n"
        'ragtime_admission_refusal_seconds_bucket{le="0.01"} 3.0\n'
        'ragtime_admission_refusal_seconds_bucket{le="+Inf"} 4.0\n'
        "ragtime_admission_refusal_seconds_count 4.0\n"
        'ragtime_event_loop_lag_measured_seconds_bucket{le="0.025"} 90.0\n'
        'ragtime_event_loop_lag_measured_seconds_bucket{le="+Inf"} 100.0\n'
        'ragtime_other_seconds_bucket{le="0.01"} 7.0\n'
    )
    found = histogram_buckets(text, (REFUSALS, LOOP_LAG))
    assert found[REFUSALS] == {0.01: 3.0, float("inf"): 4.0}
    assert found[LOOP_LAG] == {0.025: 90.0, float("inf"): 100.0}
    assert histogram_buckets("", (REFUSALS,)) == {REFUSALS: {}}


def test_a_burst_meets_its_target_only_with_none_late() -> None:
    on_time = summarize_burst([record(200, 500.0)] * 21 + [record(503, 3.0)] * 4, wall_s=0.5)
    assert judge_burst("t", 25, 1.0, [on_time, on_time, on_time]).met is True
    late = summarize_burst([record(200, 500.0)] * 21 + [record(200, 1500.0)], wall_s=1.5)
    assert judge_burst("t", 25, 1.0, [on_time, late, on_time]).met is False
    few = summarize_burst([record(200, 500.0)] * 19, wall_s=0.5)
    assert judge_burst("t", 25, 1.0, [few, few, on_time]).met is False  # median 19 < 20


def test_the_section_gives_previous_now_target_and_verdict() -> None:
    rep = summarize_burst([record(200, 500.0)] * 22 + [record(503, 3.0)] * 3, wall_s=0.5)
    now = BurstBench(created="now", command="ragtime bench burst", machine={}, targets=[],
                     bursts=[judge_burst("t", 25, 1.0, [rep])])  # fmt: skip
    old_rep = summarize_burst([record(200, 500.0)] * 4, wall_s=0.5)
    before = BurstBench(created="then", command="old", machine={}, targets=[],
                        bursts=[judge_burst("t", 25, 1.0, [old_rep])])  # fmt: skip
    text = section([now], before)
    row = next(line for line in text.splitlines() if line.startswith("| 25 | 1 s |"))
    assert "| 4 (4) | 22 (22) | >= 20, none late |" in row and row.endswith("| met |")
    assert "| 100 | 1 s | n/a | n/a |" in text


def test_a_missed_burst_says_why_from_what_was_measured() -> None:
    refusals = [record(200, 500.0)] * 30 + [record(503, 40.0)] * 5
    rep = summarize_burst([*refusals, record(200, 1100.0, sent_ms=300.0)], wall_s=1.1)
    rep.server_refusal_ms_p99, rep.server_loop_lag_ms_p99 = 80.0, 25.0
    rep.server_refusal_after_read_ms_p99 = 0.5
    quick = rep.model_copy(update={"server_refusal_after_read_ms_p99": 0.25})
    result = judge_burst("t", 100, 1.0, [rep, quick, rep])
    assert result.met is False and result.loop_lag_ms_p99_max == 25.0
    assert result.refusal_after_read_ms_p99_max == 0.5  # the worst repeat
    why = why_missed(result)
    assert "each refusal was sent within 0.5 ms of the request's read (p99)" in why
    assert "3 late counted from the burst's start, 0 of them on the wire" in why
    assert "up to 300 ms after the burst began" in why
    assert "refusal p99 ≤ 80 ms on the server against 50 ms" in why
    assert "the loop's lag was ≤ 25 ms at p99" in why
    rep.server_socket_wait_ms_p99 = 250.0  # the kernel's figure, where the server measured it
    waited = why_missed(judge_burst("t", 100, 1.0, [rep]))
    assert "bytes waited ≤ 250 ms at p99 in the kernel" in waited
    assert "while the loop's lag was ≤ 25 ms at p99" in waited
    text = section([BurstBench(created="now", command="c", machine={}, targets=[],
                               bursts=[result])], None)  # fmt: skip
    assert "Why the missed rows miss:" in text and f"- 100 at 1 s, missed: {why}" in text
    assert "| ≤ 80 (≤ 0.5; 40) |" in text  # server (after read; wire)
    met = judge_burst("t", 25, 1.0, [summarize_burst([record(200, 500.0)] * 25, wall_s=0.5)])
    assert met.met is True and why_missed(met) == ""


def test_a_refusal_waiting_for_its_body_says_how_long_the_client_took_to_write_it() -> None:
    """The server decides once a question's body (its budget) is read: the client's own gap
    between a refused request's headers and its body is reported beside the server's time."""
    refused = [record(503, 40.0, sent_ms=10.0, body_sent_ms=10.0 + gap) for gap in (2.0, 9.0)]
    rep = summarize_burst([record(200, 500.0)] * 30 + refused, wall_s=0.6)
    assert rep.refused_body_gap_ms_p99 == pytest.approx(8.93)
    rep.server_refusal_ms_p99, rep.server_refusal_after_read_ms_p99 = 80.0, 25.0
    result = judge_burst("t", 100, 1.0, [rep])
    assert result.body_gap_ms_p99_max == pytest.approx(8.93)
    assert "the body the client writes apart from the head (up to 9 ms after it here" in (
        why_missed(result)
    )


def test_a_refusal_target_met_with_nobody_refused_says_so() -> None:
    answered = summarize_burst([record(200, 500.0)] * 100, wall_s=0.5)
    now = BurstBench(created="now", command="ragtime bench burst", machine={}, targets=[],
                     bursts=[judge_burst("t", 100, 1.0, [answered])])  # fmt: skip
    row = next(line for line in section([now], None).splitlines() if line.startswith("| 100 |"))
    assert row.endswith("| met (no request refused: the refusal target was not put to the test) |")
    refused = summarize_burst([record(200, 500.0)] * 90 + [record(503, 3.0)] * 10, wall_s=0.5)
    refused.server_refusal_ms_p99 = 5.0
    now.bursts = [judge_burst("t", 100, 1.0, [refused])]
    row = next(line for line in section([now], None).splitlines() if line.startswith("| 100 |"))
    assert row.endswith("| met |")
