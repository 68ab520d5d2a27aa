"""BENCHMARKS.md from JSON files of runs: the summary figures, the commands, the plots."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli.commands import main
from bench.harness.record import write_json
from bench.harness.results import (
    Run,
    TargetInfo,
    summarize_run,
)
from bench.report.benchmarks_md import KEPT_MARK, write_benchmarks
from bench.report.budget_md import splice
from bench.report.prefix_md import NAIVE, OURS
from tests.helpers.bench_results import make_result, make_run


def with_users(run: Run, users: int) -> Run:
    return run.model_copy(update={"users": users, "load": f"{users} user" + "s" * (users > 1)})


def test_write_benchmarks(tmp_path: Path) -> None:
    cpu_target = TargetInfo(
        name="cpu-default",
        url="u",
        kind="ragtime",
        config_path="benchmarks/cpu-default.env",
        config={"RAGTIME_DATA_DIR": "bench-results/data"},
    )
    cpu = make_result(
        "ragtime bench load --serve benchmarks/cpu-default.env --concurrency 1,2",
        [
            with_users(make_run("cpu-default", [900.0] * 10), 1),
            with_users(make_run("cpu-default", [1800.0] * 10), 2),
        ],
        [cpu_target],
    )
    null_target = TargetInfo(name="null", url="u", kind="ragtime")
    floor_target = TargetInfo(name="floor", url="u", kind="floor")
    overhead = make_result(
        "ragtime bench load --serve benchmarks/null.env --floor",
        [make_run("floor", [2.0] * 20), make_run("null", [3.5] * 20)],
        [floor_target, null_target],
    )
    ceiling = make_result(
        "ragtime bench load --serve benchmarks/null.env --rates 10,20",
        [make_run("null", [4.0] * 50, rate=10), make_run("null", [9.0] * 50, rate=20)],
        [null_target],
    )
    paths = {}
    for name, res in (("cpu", cpu), ("overhead", overhead), ("ceiling", ceiling)):
        paths[name] = tmp_path / f"{name}.json"
        write_json(res, paths[name])
    out, plots = tmp_path / "BENCHMARKS.md", tmp_path / "benchmarks"
    argv = [
        "bench", "report", "--cpu", str(paths["cpu"]), "--overhead", str(paths["overhead"]),
        "--ceiling", str(paths["ceiling"]), "--out", str(out), "--plots", str(plots),
    ]  # fmt: skip
    assert main(argv) == 0
    text = out.read_text()
    assert "1 user: TTFT p50 900 ms, p95 900 ms (n=10)" in text
    assert "2 users: TTFT p50 1800 ms" in text
    assert "TTFT p50 +1.50 ms (1.8x the floor's 2.00 ms)" in text
    assert "Ceiling of null: 10 req/s held TTFT p99 under twice its 4.0 ms" in text
    # The targets table: each row now, beside the previous figure (benchmarks/targets.json).
    row = "| CPU default, 1 user, TTFT p50 | 1,109 ms | 900 ms | <= 600 ms (500 ms) | **missed** |"
    assert row in text
    assert "| +23.6 ms | +1.5 ms | <= +8.0 ms (+2.0 ms) | met |" in text
    assert "| 25.0 req/s | 10.0 req/s | >= 150 req/s (300 req/s) | **missed** |" in text
    assert "| 31.0% | n/a | >= 60.0% | not run |" in text
    assert "Why the missed rows miss:" in text and "- null-backend ceiling" in text
    assert "ragtime bench load --serve benchmarks/cpu-default.env --concurrency 1,2" in text
    assert "RAGTIME_DATA_DIR=bench-results/data" in text
    assert "2 cores, AMD EPYC" in text
    images = sorted(p.name for p in plots.iterdir())
    assert images == [
        "cpu-latency-cdf.png", "cpu-stages.png", "overhead-latency-cdf.png",
        "overhead-stages.png", "ttft-vs-load.png",
    ]  # fmt: skip
    for name in images:
        assert f"](benchmarks/{name})" in text


def test_write_benchmarks_needs_no_cli(tmp_path: Path) -> None:
    run = make_run("null", [1.0] * 5, rate=5)
    res = make_result("c", [run], [TargetInfo(name="null", url="u", kind="ragtime")])
    written = write_benchmarks(
        tmp_path / "B.md", cpu=res, overhead=res, ceilings=[res], plot_dir=tmp_path,
        setup_command="ragtime setup-demo",
    )  # fmt: skip
    assert written[0].read_text().startswith("# ragtime benchmarks")


def with_cache(run: Run, prompt: int, cached: int) -> Run:
    for record in run.requests:
        record.prompt_tokens, record.cached_tokens = prompt, cached
    return run.model_copy(update={"summary": summarize_run(run.requests, run.wall_s)})


@pytest.mark.usefixtures("unrendered_plots")
def test_the_prefix_section(tmp_path: Path) -> None:
    run = make_run("null", [1.0] * 5, rate=5)
    base = make_result("c", [run], [TargetInfo(name="null", url="u", kind="ragtime")])
    targets = [
        TargetInfo(name=name, url="u", kind="ragtime", config_path=f"benchmarks/{name}.env",
                   config={"RAGTIME_PROMPT_LAYOUT": layout})
        for name, layout in (("prefix-shared", OURS), ("prefix-naive", NAIVE))
    ]  # fmt: skip
    prefix = make_result(
        "ragtime bench load --serve benchmarks/prefix-shared.env "
        "--serve benchmarks/prefix-naive.env --questions demo/questions-grouped.txt",
        [
            with_cache(make_run("prefix-shared", [400.0] * 8), 500, 400),
            with_cache(make_run("prefix-naive", [1000.0] * 8), 500, 100),
        ],
        targets,
    )
    sim_targets = [
        TargetInfo(name=name, url="u", kind="ragtime", config_path=f"benchmarks/{name}.env",
                   config={"RAGTIME_PROMPT_LAYOUT": layout})
        for name, layout in (("prefix-sim-shared", OURS), ("prefix-sim-naive", NAIVE))
    ]  # fmt: skip
    sim = make_result(
        "ragtime bench load --serve benchmarks/prefix-sim-shared.env "
        "--serve benchmarks/prefix-sim-naive.env --fake-sglang natural_tokens=4",
        [
            with_cache(make_run("prefix-sim-shared", [10.0] * 2), 100, 45),
            with_cache(make_run("prefix-sim-naive", [10.0] * 2), 100, 0),
        ],
        sim_targets,
    )
    paths = {"base": tmp_path / "base.json", "prefix": tmp_path / "prefix.json"}
    write_json(base, paths["base"])
    write_json(prefix, paths["prefix"])
    write_json(sim, tmp_path / "fake.json")
    out = tmp_path / "BENCHMARKS.md"
    argv = [
        "bench", "report", "--cpu", str(paths["base"]), "--overhead", str(paths["base"]),
        "--ceiling", str(paths["base"]), "--prefix", str(paths["prefix"]),
        "--prefix-fake", str(tmp_path / "fake.json"), "--out", str(out), "--plots", str(tmp_path),
    ]  # fmt: skip
    assert main(argv) == 0
    text = out.read_text()
    assert "## 4. Prefix caching: ragtime's layout vs question first" in text
    assert (
        "| llama.cpp (CPU default), `prefix-shared` | `shared_prefix_first` | 8 | 4000 | 3200 "
        "| 80.0% | 400 (n=8) | 400 |"
    ) in text
    assert "| `question_first` | 8 | 4000 | 800 | 20.0% | 1000 (n=8) |" in text
    assert "cached-token ratio 4.00x, TTFT p50 0.40x" in text
    assert (
        "| simulated SGLang (RadixAttention-like trie), `prefix-sim-shared` "
        "| `shared_prefix_first` | 2 | 200 | 90 " in text
    )
    assert "cached-token ratio 45.0% against 0.0% (n=2 and 2)" in text
    assert "--questions demo/questions-grouped.txt" in text  # the command is listed
    assert "--fake-sglang natural_tokens=4" in text  # and so is the simulated half's
    assert text.index("## 4. Prefix") < text.index("## Reading these numbers")


@pytest.mark.usefixtures("unrendered_plots")
def test_the_targets_rows_from_the_prefix_runs_and_the_profile(tmp_path: Path) -> None:
    run = make_run("null", [1.0] * 5, rate=5)
    base = make_result("c", [run], [TargetInfo(name="null", url="u", kind="ragtime")])
    states = make_result(
        "ragtime bench load --serve benchmarks/prefix-states.env "
        "--serve benchmarks/prefix-states-off.env",
        [
            with_cache(make_run("prefix-states", [100.0] * 8), 500, 350),
            with_cache(make_run("prefix-states-off", [900.0] * 8), 500, 100),
        ],
        [
            TargetInfo(name="prefix-states", url="u", kind="ragtime", config={}),
            TargetInfo(name="prefix-states-off", url="u", kind="ragtime",
                       config={"RAGTIME_GENERATION_PREFIX_STATES": "0"}),
        ],
    )  # fmt: skip
    profile = tmp_path / "null.txt"
    profile.write_text(
        "serve (app/cli/commands.py:10);embed (retrieval/embeddings.py:5);"
        "run (onnxruntime/session.py:9) 30\n"
        "serve (app/cli/commands.py:10);route (app/http/routes/ask.py:3) 10\n"
    )
    out = tmp_path / "B.md"
    write_benchmarks(
        out, cpu=base, overhead=base, ceilings=[base], plot_dir=tmp_path,
        setup_command="s", prefix_states=states, profile=profile,
    )  # fmt: skip
    text = out.read_text()
    assert "| 61.2% | 70.0% | >= 60.0% | met |" in text
    assert "cached-token share 70.0% against 20.0%, TTFT p50 100 against 900 ms" in text
    assert "py-spy, 40 samples" in text
    assert "| `embed (retrieval/embeddings.py)` | 75.0% | 0.0% |" in text
    assert "| `run (onnxruntime/session.py)` | 75.0% | 75.0% |" in text


@pytest.mark.usefixtures("unrendered_plots")
def test_the_sections_below_the_kept_mark_survive_a_rewrite(tmp_path: Path) -> None:
    run = make_run("null", [1.0] * 5, rate=5)
    res = make_result("c", [run], [TargetInfo(name="null", url="u", kind="ragtime")])
    out = tmp_path / "B.md"
    write = lambda: write_benchmarks(  # noqa: E731
        out, cpu=res, overhead=res, ceilings=[res], plot_dir=tmp_path, setup_command="s"
    )
    write()
    out.write_text(out.read_text() + "\n## 9. Retrieval evaluation\n\nnDCG@10 0.7\n")
    write()
    write()
    text = out.read_text()
    assert text.count(KEPT_MARK) == 1
    assert text.endswith("## 9. Retrieval evaluation\n\nnDCG@10 0.7\n")


@pytest.mark.usefixtures("unrendered_plots")
def test_the_studies_index_survives_a_rewrite_of_the_real_file(tmp_path: Path) -> None:
    """``make bench`` over today's BENCHMARKS.md: its sections are written again, the index of
    studies by hand below the kept mark stays whole, and a block spliced in (a section command
    after the report) goes above it."""
    real = (Path(__file__).resolve().parents[2] / "BENCHMARKS.md").read_text()
    out = tmp_path / "BENCHMARKS.md"
    out.write_text(real)
    run = make_run("null", [1.0] * 5, rate=5)
    res = make_result("c", [run], [TargetInfo(name="null", url="u", kind="ragtime")])
    write_benchmarks(
        out, cpu=res, overhead=res, ceilings=[res], plot_dir=tmp_path, setup_command="s"
    )
    out.write_text(
        splice(
            out.read_text(),
            "<!-- b -->\n## 6. A block\n<!-- /b -->",
            begin="<!-- b -->",
            end="<!-- /b -->",
        )
    )
    text = out.read_text()
    tail = real[real.index(KEPT_MARK) :]
    assert "## Studies by hand" in tail
    assert text.endswith(tail)
    assert text.count(KEPT_MARK) == 1
    assert text.index("## 6. A block") < text.index("## Reading these numbers") < text.index(tail)
