"""``ragtime bench ceiling`` without timing anything: wrk's output read from real runs recorded
in ``tests/bench/data`` (against the floor, at 100 req/s and, overloaded, at 2500), its command
line, the sweep's turns and when a target leaves it, the ceiling's rule, the ratio, the median
and the spread across runs, and the section of BENCHMARKS.md."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.cli.commands import main
from bench.report.ceiling_md import BEGIN, END, section, write_section
from bench.suites.ceiling import measure
from bench.suites.ceiling.measure import Endpoint, cpu_seconds, fresh_questions, leaves, sweep
from bench.suites.ceiling.results import (
    CeilingBench,
    CeilingRun,
    LowRate,
    Workers,
    aggregate,
    met,
    ratio_of,
    spread,
    sweep_of,
)
from bench.suites.ceiling.wrk import (
    SCRIPT,
    LatencyMs,
    WrkPhase,
    connections_for,
    parse_wrk_output,
    write_bodies,
    wrk_command,
)
from tests.helpers.bench_results import make_result, make_run

DATA = Path(__file__).parent / "data"


def phase(target: str, rate: float, p99: float, *, bad: int = 0, late: int = 0) -> WrkPhase:
    """A phase of 200 answered requests whose whole-response p99 was ``p99`` ms."""
    return WrkPhase(
        target=target, rate=rate, seconds=2.0, connections=16, sent=200, answered=200, bad=bad,
        transport_errors=0, timeouts=0, late=late, late_ms_max=0.0,
        latency_ms=LatencyMs(n=200, p50=p99 / 2, p99=p99), error_ratio=bad / 200,
        answered_rps=(200 - bad) / 2.0,
    )  # fmt: skip


def test_a_recorded_run_of_wrk_is_read() -> None:
    got = parse_wrk_output(
        (DATA / "wrk-floor-100.txt").read_text(), target="floor", rate=100, connections=25
    )
    assert (got.sent, got.answered, got.bad, got.late) == (269, 266, 0, 0)
    assert (got.transport_errors, got.timeouts, got.error_ratio) == (0, 0, 0.0)
    assert got.seconds == 3.007 and got.answered_rps == round(266 / 3.007, 2)
    lat = got.latency_ms
    assert (lat.n, lat.p50, lat.p90, lat.p99, lat.p999) == (266, 1.64, 4.496, 22.657, 25.604)
    assert (lat.min, lat.max) == (0.783, 25.604)


def test_an_overloaded_run_counts_its_late_arrivals() -> None:
    got = parse_wrk_output(
        (DATA / "wrk-floor-2500.txt").read_text(), target="floor", rate=2500, connections=625
    )
    assert (got.sent, got.answered, got.late) == (1926, 1300, 1250)
    assert got.late_ms_max == pytest.approx(1418.597)
    assert got.latency_ms.p50 == 813.259 and got.answered_rps < 2500 / 5


def test_errors_and_a_missing_line() -> None:
    line = (
        'ragtime-wrk {"duration_us": 2000000, "requests": 90, "bytes": 1, "sent": 100, "late": 0, '
        '"late_ms_max": 0.0, "bad": 5, "errors": {"connect": 0, "read": 10, "write": 0, '
        '"status": 5, "timeout": 0}, "latency_us": {"min": 0, "max": 0, "mean": 0, "stdev": 0, '
        '"p50": 1000, "p90": 0, "p99": 0, "p99.9": 0}}'
    )
    got = parse_wrk_output("Running 2s test\n" + line, target="t", rate=50, connections=16)
    assert got.error_ratio == round(15 / 100, 4) and got.answered_rps == 42.5
    none = line.replace('"requests": 90', '"requests": 0')
    assert parse_wrk_output(none, target="t", rate=50, connections=16).latency_ms.p50 is None
    with pytest.raises(ValueError, match="ragtime-wrk"):
        parse_wrk_output("Running 2s test\n", target="t", rate=50, connections=16)


def test_the_command_line_of_a_phase(tmp_path: Path) -> None:
    argv = wrk_command(
        "http://127.0.0.1:9/", bodies=tmp_path / "b.txt", rate=150, seconds=3, connections=38,
        key="k", seed=2, lead_s=0.5,
    )  # fmt: skip
    assert argv[:4] == ["wrk", "-t1", "-c38", "-d4s"]
    assert argv[argv.index("Authorization: Bearer k") - 1 :][:2] == [
        "-H",
        "Authorization: Bearer k",
    ]
    script = argv.index("-s")
    assert argv[script + 1 : script + 3] == [str(SCRIPT), "http://127.0.0.1:9/v1/ask"]
    assert argv[argv.index("--") + 1 :] == [str(tmp_path / "b.txt"), "150", "2", "1", "500"]
    keyless = wrk_command("http://h:1", bodies=tmp_path, rate=1, seconds=1, connections=16)
    assert not any(a.startswith("Authorization") for a in keyless)
    assert SCRIPT.is_file()


def test_connections_cover_a_quarter_second_of_arrivals() -> None:
    assert [connections_for(r) for r in (10, 100, 400, 10_000)] == [16, 25, 100, 1024]


def test_bodies_are_one_json_line_each(tmp_path: Path) -> None:
    path = write_bodies(['say "hi"', "two\nlines?"], tmp_path / "sub" / "bodies.txt")
    lines = path.read_text().splitlines()
    assert [json.loads(x) for x in lines] == [
        {"question": 'say "hi"', "stream": True},
        {"question": "two\nlines?", "stream": True},
    ]


def test_fresh_questions_are_never_the_same_twice() -> None:
    one, two = fresh_questions(["a?", "b?"], 1, 5), fresh_questions(["a?", "b?"], 2, 5)
    assert one[:3] == ["a? (variant 1.1)", "b? (variant 1.2)", "a? (variant 1.3)"]
    assert len(set(one) | set(two)) == 10
    with pytest.raises(ValueError):
        fresh_questions([], 1, 3)


def test_the_cpu_time_of_a_process_and_its_children() -> None:
    mine = cpu_seconds(os.getpid())
    assert mine is not None and mine > 0
    assert cpu_seconds(None) is None and cpu_seconds(2**22 + 12345) is None


def test_a_target_leaves_after_its_patience() -> None:
    held = [phase("f", 10, 5.0), phase("f", 20, 9.0)]
    assert not leaves(held, factor=2, patience=2)
    one_miss = [*held, phase("f", 40, 11.0)]
    assert not leaves(one_miss, factor=2, patience=2)
    assert leaves([*one_miss, phase("f", 80, 9.0, bad=5)], factor=2, patience=2)  # 2.5% errors
    assert leaves([phase("f", 10, 5.0), phase("f", 20, 30.0)], factor=2, patience=1)


def test_the_sweep_alternates_and_drops_a_target(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    p99s = {"floor": {10: 5, 20: 5, 40: 5, 80: 50}, "ragtime": {10: 20, 20: 50, 40: 60, 80: 1}}
    calls = []

    def fake(name: str, url: str, **kw: object) -> WrkPhase:
        rate = float(kw["rate"])  # type: ignore[arg-type]
        calls.append((name, rate, kw["seconds"], kw["key"]))
        return phase(name, rate, p99s[name][int(rate)])

    monkeypatch.setattr(measure, "run_wrk", fake)
    endpoints = [Endpoint("floor", "u1"), Endpoint("ragtime", "u2", "k")]
    phases = sweep(
        endpoints, [40, 10, 80, 20], bodies=tmp_path, seconds=2, min_requests=50, factor=2,
        patience=2, pause_s=0, seed=1, say=lambda s: None,
    )  # fmt: skip
    assert [(n, r) for n, r, _, _ in calls] == [
        ("floor", 10), ("ragtime", 10), ("ragtime", 20), ("floor", 20),
        ("floor", 40), ("ragtime", 40), ("floor", 80),
    ]  # fmt: skip
    assert calls[0][2] == 5 and calls[2][2] == 3 and calls[4][2] == 2  # min requests
    assert calls[1][3] == "k" and calls[0][3] is None
    assert len(phases) == 7
    floor, ragtime = sweep_of("floor", phases), sweep_of("ragtime", phases)
    assert (floor.ceiling.ceiling_rps, floor.ceiling.first_failing_rps) == (40, 80)
    assert (ragtime.ceiling.ceiling_rps, ragtime.ceiling.first_failing_rps) == (10, 20)
    assert ragtime.ceiling.reason.startswith("at 20 req/s latency (whole response) p99 was 50.0")
    assert ratio_of(floor.ceiling, ragtime.ceiling) == 0.25


def test_a_failure_below_the_ceiling_is_a_blip() -> None:
    phases = [phase("r", 10, 5.0), phase("r", 20, 10.5), phase("r", 40, 9.0), phase("r", 80, 30)]
    c = sweep_of("r", phases).ceiling
    assert (c.ceiling_rps, c.first_failing_rps, c.limit_ttft_p99_ms) == (40, 80, 10.0)
    assert c.reason.endswith("; isolated failures below the ceiling at 20 req/s")


def test_ratio_median_and_spread() -> None:
    floor = sweep_of("f", [phase("f", 10, 5.0), phase("f", 20, 50.0)]).ceiling
    none = sweep_of("r", [phase("r", 10, 5.0, bad=10), phase("r", 20, 50.0)]).ceiling
    assert ratio_of(floor, none) is None and ratio_of(none, floor) is None
    s = spread([0.5, None, 0.25, 0.75])
    assert s is not None and (s.median, s.min, s.max, s.values) == (
        0.5,
        0.25,
        0.75,
        [0.5, 0.25, 0.75],
    )
    assert spread([None]) is None and spread([0.2, 0.4]).median == 0.3  # type: ignore[union-attr]


def low(kind: str, extra: float) -> LowRate:
    return LowRate(
        questions=kind, rate=10, n_floor=100, n_ragtime=100, errors=0, floor_ttft_p50_ms=2.0,
        ragtime_ttft_p50_ms=2.0 + extra, floor_e2e_p50_ms=2.5, ragtime_e2e_p50_ms=12.0 + extra,
        extra_ms=extra, ragtime_stages_p50_ms={"embed": extra - 3.0, "search": 1.0},
    )  # fmt: skip


def bench(ratios_of: list[tuple[float, float]], fresh: list[float]) -> CeilingBench:
    """A result of one run per (floor p99 at 80, ragtime p99 at 40) pair, fresh extras given."""
    runs = []
    for number, ((f80, r40), extra) in enumerate(zip(ratios_of, fresh, strict=True), 1):
        top = phase("floor", 80, f80).model_copy(update={"server_cpu_ms": 1.5})
        phases = [phase("floor", 10, 5.0), phase("floor", 40, 6.0), top,
                  phase("ragtime", 10, 20.0), phase("ragtime", 40, r40, late=3)]  # fmt: skip
        f, r = sweep_of("floor", phases), sweep_of("ragtime", phases)
        runs.append(
            CeilingRun(
                number=number, floor=f, ragtime=r, ratio=ratio_of(f.ceiling, r.ceiling),
                low_rate=[low("fresh", extra), low("repeats", 4.0)],
                loadavg=[[1.0, 1.0, 1.0], [1.5, 1.0, 1.0]],
            )
        )  # fmt: skip
    return CeilingBench(
        created="2026-12-06T00:00:00+00:00", command="ragtime bench ceiling --runs 3",
        machine={"cores": 2, "cpu_model": "Xeon", "loadavg_at_start": [1, 1, 1]},
        versions={"commit": "abc"}, generator="wrk debian/4.1.0-3+b2 [epoll]",
        generator_command="wrk -t1 ...", config_path="benchmarks/null.env", config={},
        workers=Workers(setting="auto", resolved=2, cores=2, auto_max=4), floor_tokens=16,
        rates=[10, 40, 80], seconds=3, min_requests=200, low_rate=10, low_requests=100,
        runs=runs, **aggregate(runs),
    )  # fmt: skip


def test_the_targets_across_runs() -> None:
    b = bench([(8.0, 30.0), (8.0, 50.0), (8.0, 30.0)], [9.0, 7.0, 12.0])
    assert [r.ratio for r in b.runs] == [0.5, 0.125, 0.5]  # ragtime 40 or 10, the floor 80
    assert b.ratio is not None and (b.ratio.median, b.ratio.min, b.ratio.max) == (0.5, 0.125, 0.5)
    assert b.fresh_extra_ms is not None and b.fresh_extra_ms.median == 9.0
    assert b.repeats_extra_ms is not None and b.repeats_extra_ms.median == 4.0
    assert met(b) == {"ratio": False, "fresh": False, "repeats": True}


def test_the_section_of_benchmarks_md() -> None:
    b = bench([(8.0, 30.0), (8.0, 50.0), (8.0, 30.0)], [9.0, 7.0, 12.0])
    client = make_result(
        "ragtime bench load --floor --rates 10,20", [make_run("floor", [4.0] * 50, rate=10)], []
    )
    text = section(b, [client])
    assert text.startswith(BEGIN + "\n## 9. ") and text.endswith(END)
    lines = text.splitlines()
    assert (
        "| ragtime's ceiling / the floor's (ragtime / floor) | 0.50 (40 req/s / 80 req/s) | "
        "0.12 (10 req/s / 80 req/s) | 0.50 (40 req/s / 80 req/s) | 0.50 (0.12 to 0.50) | "
        ">= 0.75 | **missed** |"
    ) in lines
    assert (
        "| ragtime's TTFT p50 over the floor's, questions never asked before | +9.0 ms | +7.0 ms "
        "| +12.0 ms | +9.0 ms (+7.0 ms to +12.0 ms) | <= +8 ms | **missed** |"
    ) in lines
    assert "| ragtime's TTFT p50 over the floor's, one question repeated | +4.0 ms" in text
    assert "| 40 | 6.0 / 30.0 (3 late) | 6.0 / **50.0 (3 late)** | 6.0 / 30.0 (3 late) |" in lines
    assert "| 80 | 8.0 / - | 8.0 / - | 8.0 / - |" in lines
    assert "| 1 | 80 req/s | 5.0 ms at 10 req/s (10.0 ms) | 40 req/s | 20.0 ms at 10 req/s" in text
    assert (
        "| 1 | never asked before | 2.00 | 11.00 | +9.0 ms | 2.50 | 21.00 | 100 / 100 | 0 |"
        in lines
    )
    assert "| embed | 6.00 | 1.00 |" in lines and "| search | 1.00 | 1.00 |" in lines
    assert "| 0.50 | 1.5 at 80 / n/a | [1.0, 1.0, 1.0] -> [1.5, 1.0, 1.0] |" in text
    assert "`RAGTIME_WORKERS=auto`: 2 processes on this machine's 2 cores" in text
    assert "4 on 4 cores or more. Only 2 cores were measured here" in text
    assert (
        "- `ragtime bench load --floor --rates 10,20` (2026-12-02T00:00:00+00:00): floor " in text
    )


def test_the_section_goes_before_the_reading_notes_and_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# b\n\n## 8. Bursts\n\n## Reading these numbers\n\nkept\n")
    write_section(out, bench([(8.0, 30.0)], [9.0]))
    write_section(out, bench([(8.0, 50.0)], [7.0]))
    text = out.read_text()
    assert text.count(BEGIN) == 1 and "| +7.0 ms |" in text and "| +9.0 ms |" not in text
    assert text.index("## 8. Bursts") < text.index(BEGIN) < text.index("## Reading these numbers")


def test_the_section_command(tmp_path: Path) -> None:
    result, out = tmp_path / "ceiling.json", tmp_path / "BENCHMARKS.md"
    result.write_text(bench([(8.0, 30.0)], [9.0]).model_dump_json())
    out.write_text("# b\n\n## Reading these numbers\n")
    assert main(["bench", "section", "--ceiling", str(result), "--out", str(out)]) == 0
    assert BEGIN in out.read_text() and "budget-engine" not in out.read_text()


def test_without_wrk_the_bench_says_how_to_get_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert main(["bench", "ceiling", "--runs", "1"]) == 1
    assert "apt-get install wrk" in capsys.readouterr().err
