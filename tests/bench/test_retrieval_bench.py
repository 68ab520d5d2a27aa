"""``ragtime bench retrieval`` at tiny sizes: the shape of its JSON and table, and Flat's
recall of 1.0 (the figures themselves are the bench's, in BENCHMARKS.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from bench.retrieval import IndexRow, build_index, run_bench, table, target_verdict


def test_the_bench_measures_every_type_at_every_size() -> None:
    result = run_bench([500, 1200], ef_search=[8, 64], nprobe=[4], queries=20, clusters=20)
    rows = {(r.index, r.size, r.param): r for r in result.rows}
    assert set(rows) == {
        (kind, size, param)
        for size in (500, 1200)
        for kind, param in [
            ("flat", ""),
            ("hnsw", "efSearch=8"),
            ("hnsw", "efSearch=64"),
            ("ivfpq", "nprobe=4"),
        ]
    }
    for size in (500, 1200):
        assert rows["flat", size, ""].recall_at_10 == 1.0
        assert rows["flat", size, ""].bytes > size * 384 * 4  # the raw float32 vectors
        assert rows["ivfpq", size, "nprobe=4"].bytes < rows["flat", size, ""].bytes
    for row in result.rows:
        assert 0.0 <= row.recall_at_10 <= 1.0
        assert 0 < row.search_p50_ms <= row.search_p99_ms
        assert row.build_s > 0 and row.add_vectors_per_s > 0
    assert "at 1200" in result.target
    assert table(result).count("\n| hnsw |") == 4


def test_the_command_writes_json_and_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "retrieval.json"
    argv = [
        "bench",
        "retrieval",
        "--sizes",
        "0.3k",
        "--types",
        "flat,hnsw",
        "--ef-search",
        "16",
        "--queries",
        "5",
        "--clusters",
        "10",
        "--json",
        str(out),
    ]
    assert main(argv) == 0
    data = json.loads(out.read_text())
    assert [(r["index"], r["size"]) for r in data["rows"]] == [("flat", 300), ("hnsw", 300)]
    assert set(data["rows"][0]) == set(IndexRow.__dataclass_fields__)
    assert data["rows"][0]["recall_at_10"] == 1.0
    assert "| flat | 300 |" in capsys.readouterr().out


def test_bad_input_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "retrieval", "--sizes", "1k", "--types", "annoy"]) == 2
    assert "unknown index type 'annoy'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "retrieval", "--sizes", "lots"])
    with pytest.raises(ValueError, match="unknown index type"):
        build_index("lsh", 384, 10)


def test_the_verdict_names_the_chosen_ef_search() -> None:
    def row(param: str, p50: float, recall: float) -> IndexRow:
        return IndexRow("hnsw", 1000, param, 1.0, 1.0, 1, p50, p50, recall)

    rows = [
        row("efSearch=16", 0.2, 0.90),
        row("efSearch=32", 0.4, 0.96),
        row("efSearch=64", 0.8, 0.99),
    ]
    assert target_verdict(rows).startswith("met at 1000: efSearch=32")
    assert target_verdict([row("efSearch=32", 1.5, 0.97)]).startswith("NOT met at 1000")
    assert "no efSearch tried reaches" in target_verdict([row("efSearch=16", 0.1, 0.5)])
