"""``ragtime bench retrieval`` at small sizes: the shape of its JSON and table, Flat's recall
of 1.0, the indexes the store would build, and saved indexes reused (the figures themselves are
the bench's, in BENCHMARKS.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.commands import main
from bench.suites.retrieval.indexes import IndexRow, index_spec, run_bench, table, target_verdict


def test_the_bench_measures_every_type_at_every_size_as_the_store_builds_it() -> None:
    """IVF-PQ needs 256 x 39 vectors to train its codes: below that the store builds Flat, so
    the bench says so instead of measuring an IVF-PQ that would never serve."""
    sizes = (300, 600)
    result = run_bench(sizes, ef_search=[8, 64], nprobe=[4], queries=20, clusters=20)
    rows = {(r.index, r.size, r.param): r for r in result.rows}
    assert set(rows) == {
        (kind, size, param)
        for size in sizes
        for kind, param in [("flat", ""), ("hnsw", "efSearch=8"), ("hnsw", "efSearch=64")]
    }
    assert result.notes == [
        f"ivfpq at {size}: not built; the store builds flat (configured: ivfpq, but {size} "
        "vectors are too few to train PQ)"
        for size in sizes
    ]
    for size in sizes:
        assert rows["flat", size, ""].recall_at_10 == 1.0
        assert rows["flat", size, ""].bytes > size * 384 * 4  # the raw float32 vectors
        assert rows["hnsw", size, "efSearch=64"].recall_at_10 > 0.9
    for row in result.rows:
        assert 0.0 <= row.recall_at_10 <= 1.0
        assert 0 < row.search_p50_ms <= row.search_p99_ms
        assert row.build_s > 0 and row.add_vectors_per_s > 0
    assert "at 600" in result.target
    assert table(result).count("\n| hnsw |") == 4
    assert "not built" in table(result)


@pytest.mark.slow
def test_ivfpq_is_measured_where_it_trains_and_a_saved_index_is_reused(tmp_path: Path) -> None:
    """Slow: training PQ codes on 10,000 vectors takes about 10 s on one thread."""

    def bench() -> IndexRow:
        (row,) = run_bench(
            [10_000], kinds=["ivfpq"], nprobe=[4], queries=20, clusters=20, index_dir=tmp_path
        ).rows
        return row

    first = bench()
    assert first.bytes < 10_000 * 384 * 4 / 4  # PQ codes: 48 bytes a vector against 1,536
    assert 0.0 < first.recall_at_10 <= 1.0 and first.add_vectors_per_s > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ivfpq-10000-c20-s0-nlist256-pq_bits8-pq_m48.faiss",
        "ivfpq-10000-c20-s0-nlist256-pq_bits8-pq_m48.json",
    ]
    again = bench()  # loaded, not trained again: the same build figures and the same answers
    assert (again.build_s, again.recall_at_10) == (first.build_s, first.recall_at_10)


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
        index_spec("lsh", 10)


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
