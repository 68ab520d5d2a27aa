"""The overload bench's judgement (bench/suites/overload): what counts as useful, refused at
arrival, a 504 after admission or late; each target's verdict; its BENCHMARKS.md block. On
records made up here: no server runs."""

from __future__ import annotations

from pathlib import Path

from bench.harness.client import RequestRecord
from bench.harness.stats import summarize
from bench.report.overload_md import BEGIN, END, read_overload_json, write_section
from bench.suites.overload.command import slots_of
from bench.suites.overload.loads import counted_since
from bench.suites.overload.report import verdicts
from bench.suites.overload.results import (
    Capacity,
    OverloadBench,
    capacity,
    open_run,
    outcomes,
)


def record(status: int, *, budget: int = 3000, e2e: float = 500.0, words: int = 10,
           exceeded: bool = False, index: int = 0) -> RequestRecord:  # fmt: skip
    return RequestRecord(
        target="t", index=index, scheduled_s=0.0, start_lag_ms=0.0, status=status,
        outcome="ok" if status == 200 else "http_error", e2e_ms=e2e, answer_words=words,
        budget_ms=budget, budget_exceeded=exceeded, ttft_ms=100.0 if status == 200 else None,
    )  # fmt: skip


def streamed_504() -> RequestRecord:
    """A stream begun, then ended by the deadline before a useful answer."""
    cut = record(200, words=1)
    cut.outcome, cut.error = "stream_error", "deadline_exceeded: the deadline cut the answer"
    return cut


def test_each_request_is_counted_once_by_what_became_of_it() -> None:
    records = [
        record(200), record(200),                   # useful
        record(503), record(504),                   # refused at arrival (the server counted 2)
        record(504), streamed_504(),                # 504s after admission
        record(200, e2e=3500.0),                    # late
        record(200, exceeded=True),                 # the server says over budget: late
        record(200, words=1),                       # cut too short to be useful
    ]  # fmt: skip
    o = outcomes(records, refused_at_arrival=2)
    assert (o.sent, o.useful, o.refused_at_arrival, o.admitted) == (9, 2, 2, 7)
    assert (o.after_admission_504, o.late, o.other) == (2, 2, 1)
    assert o.after_admission_504_share == 2 / 7


def test_the_servers_count_is_the_floor_of_the_refusals() -> None:
    o = outcomes([record(503), record(503), record(504)], refused_at_arrival=0)
    assert (o.refused_at_arrival, o.after_admission_504) == (2, 1), "a 503 is a refusal"
    assert counted_since({"overloaded": 3.0}, {"overloaded": 5.0, "budget_infeasible": 1.0}) == 3


def bench_of(useful_on: int, useful_off: int, late: int = 0) -> OverloadBench:
    cap = Capacity(users=4, budget_ms=10000, outcomes=outcomes([record(200)] * 40, 0),
                   wall_s=4.0, rps=10.0)  # fmt: skip
    over = open_run("overload 2x", 2.0, 20.0, 10.0,
                    [record(200)] * 95 + [record(504)] * 1 + [record(503)] * 100, 100)  # fmt: skip

    def mixed(useful: int) -> list[RequestRecord]:
        tight = [record(200, budget=700)] * useful + [record(503, budget=700)] * (50 - useful)
        return tight + [record(200, budget=5000)] * 50

    off = open_run("off", 1.5, 15.0, 10.0, mixed(useful_off), 50 - useful_off)
    overdue = [record(200, budget=5000, e2e=6000.0)] * late
    on = open_run("on", 1.5, 15.0, 10.0, mixed(useful_on) + overdue, 50 - useful_on)
    return OverloadBench(created="now", command="ragtime bench overload", machine={"cores": 2},
                         versions={"commit": "abc"}, engine="max_running=4", slots=4,
                         capacity=cap, overload=over, priority_off=off, priority_on=on)  # fmt: skip


def test_the_verdicts_follow_the_issues_rows() -> None:
    met = {v.target: v.met for v in verdicts(bench_of(useful_on=45, useful_off=25))}
    assert all(met.values()), met
    missed = {v.target: v.met for v in verdicts(bench_of(useful_on=30, useful_off=25, late=1))}
    tight = [t for t in missed if "useful share" in t]
    assert tight and not missed[tight[0]], "+10 points, under 80%: missed"
    assert not missed["priority on: every request within budget"]
    assert missed["overload 2x: goodput >= 90% of capacity"]
    assert missed["overload 2x: 504s after admission <= 2%"], "1 of 96 admitted"


def test_the_capacity_is_useful_answers_a_second() -> None:
    cap = capacity(4, 10000, [record(200)] * 30 + [record(504)] * 10, 5.0)
    assert cap.rps == 6.0


def test_the_section_is_written_between_its_markers(tmp_path: Path) -> None:
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# Benchmarks\n\n## Reading these numbers\n")
    bench = bench_of(useful_on=45, useful_off=25)
    saved = tmp_path / "overload.json"
    saved.write_text(bench.model_dump_json())
    write_section(out, read_overload_json(saved))
    write_section(out, bench)  # again: replaced, not added
    text = out.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert text.index(END) < text.index("## Reading these numbers")
    assert "| priority: goodput falls <= 10% |" in text and "`ragtime bench overload`" in text


def test_the_engines_slots_come_from_its_spec() -> None:
    assert slots_of("fixed_ms=30,max_running=4") == 4
    assert slots_of("fixed_ms=30") == 64
    assert summarize([]).n == 0


def test_late_is_judged_on_the_wire_and_the_clients_lag_is_counted_apart() -> None:
    sent_late = record(200, budget=700, e2e=735.0)
    sent_late.sent_ms = 104.0  # the client wrote it 104 ms after it was due
    on_time_but_slow = record(200, budget=700, e2e=735.0)
    on_time_but_slow.sent_ms = 0.4
    o = outcomes([sent_late, on_time_but_slow], 0)
    assert (o.late, o.sent_late) == (1, 1)
