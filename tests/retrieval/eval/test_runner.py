"""``evaluate`` end to end on the tiny doc tree, with fast doubles: the hash embedder, the
word-overlap reranker and the one-token-per-word prompt tokenizer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from inference import PromptAssembler
from retrieval.eval import build_dataset, evaluate, fixed_word_chunks, require_sources, table
from retrieval.eval.rows import rerank_levels
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.rerankers import OverlapReranker
from tests.fakes.word_tokenizer import WordTokenizer


def test_fixed_word_chunks_cut_every_n_words() -> None:
    assert fixed_word_chunks("a b c d e", words=2) == ["a b", "c d", "e"]
    assert fixed_word_chunks("  ") == []


def test_rerank_levels_follow_the_policy() -> None:
    assert rerank_levels(20, 4) == [20, 10, 4]
    assert rerank_levels(6, 4) == [6, 4]
    assert rerank_levels(2, 4) == [4]


def test_evaluate_scores_every_retriever(eval_data: Path, tmp_path: Path) -> None:
    dataset = build_dataset(require_sources(eval_data), tmp_path / "corpus")
    reranker = OverlapReranker()
    report = evaluate(
        dataset,
        embedder=HashEmbedder(),
        baseline_embedder=HashEmbedder(),
        rerankers=[reranker],
        packer=PromptAssembler(WordTokenizer(), context_tokens=100),
        rerank_candidates=6,
        top_k=4,
        context_tokens=100,
        min_context_tokens=10,
        depth=10,
        work_dir=tmp_path / "work",
    )
    kinds = [row.kind for row in report.rows]
    assert kinds == ["baseline", "vector", "rerank", "rerank"] + ["prompt"] * 12
    assert report.questions == 4 and report.documents == 7
    assert report.baseline_chunks == 7  # every document is under 200 words
    assert report.ragtime_chunks >= 7
    # Every document is retrieved at depth 10, so recall@10 is 1 for the full rankings.
    for row in report.rows[:4]:
        assert row.scores.recall_at_10 == 1.0
        assert row.scores.questions == 4
    assert reranker.cross_encoder.pairs_scored == 4 * 6 + 4 * 4
    assert report.rows[2].ms_per_candidate_p50 is not None
    # A smaller context never lets more passages into the prompt: recall only falls.
    cut = [r for r in report.rows if r.kind == "prompt" and r.note != "context_pruned"]
    pruned = [r for r in report.rows if r.note == "context_pruned"]
    assert len(cut) == len(pruned) == 6
    prompt = [row.scores.recall_at_10 for row in cut]
    assert prompt == sorted(prompt, reverse=True)
    assert prompt[-1] < prompt[0]  # 12 tokens hold at most one passage
    # Pruned, a small context holds a sentence or more of more passages than the cut one.
    assert all(p.name.endswith(", pruned") for p in pruned)
    assert pruned[-1].scores.recall_at_10 >= cut[-1].scores.recall_at_10
    rendered = table(report)
    assert "| ragtime: vector order (no rerank) |" in rendered
    assert "nDCG@10" in rendered


def test_a_kept_store_and_vectors_are_reused_and_a_change_rebuilds(
    eval_data: Path, tmp_path: Path
) -> None:
    sources = require_sources(eval_data)
    lines: list[str] = []
    embedder = HashEmbedder()
    calls: list[int] = []
    real_embed = embedder.embed

    def counting_embed(texts: Sequence[str]) -> np.ndarray:
        calls.append(len(texts))
        return real_embed(texts)

    embedder.embed = counting_embed  # type: ignore[method-assign]
    kwargs = dict(
        embedder=HashEmbedder(),
        baseline_embedder=embedder,
        depth=10,
        work_dir=tmp_path / "work",
        say=lines.append,
    )
    evaluate(build_dataset(sources, tmp_path / "corpus"), **kwargs)  # type: ignore[arg-type]
    assert "baseline: 7 chunks, 0 vectors kept" in lines
    assert not any("store kept" in line for line in lines)
    lines.clear()
    calls.clear()
    evaluate(build_dataset(sources, tmp_path / "corpus"), **kwargs)  # type: ignore[arg-type]
    assert any("store kept" in line for line in lines)
    assert "baseline: 7 chunks, 7 vectors kept" in lines
    assert calls == [4]  # only the questions were embedded again
    lines.clear()
    (sources / "library" / "turtle.rst.txt").write_text("turtle\n======\n\nNew text.\n")
    report = evaluate(build_dataset(sources, tmp_path / "corpus"), **kwargs)  # type: ignore[arg-type]
    assert not any("store kept" in line for line in lines)
    assert "baseline: 7 chunks, 6 vectors kept" in lines  # the changed file's chunk only
    assert report.notes == [
        "no cross-encoder was available: no rerank rows",
        "no prompt tokenizer: no context rows",
    ]


def test_a_sampled_corpus_keeps_every_answer(eval_data: Path, tmp_path: Path) -> None:
    full = build_dataset(require_sources(eval_data), tmp_path / "full")
    some = build_dataset(require_sources(eval_data), tmp_path / "some", sample=0.5)
    assert some.sample == 0.5 and some.questions == full.questions
    docs = sorted(p.name for p in (some.corpus_dir / "docs").rglob("*.txt"))
    assert len(docs) < 3 and some.documents == 4 + len(docs)
    assert (
        build_dataset(require_sources(eval_data), tmp_path / "again", sample=0.5).fingerprint
        == some.fingerprint
    )
    with pytest.raises(ValueError, match="sample must be in"):
        build_dataset(require_sources(eval_data), tmp_path / "none", sample=0.0)


def test_a_depth_below_ten_is_refused(eval_data: Path, tmp_path: Path) -> None:
    dataset = build_dataset(require_sources(eval_data), tmp_path / "corpus")
    with pytest.raises(ValueError, match="depth must be at least 10"):
        evaluate(
            dataset,
            embedder=HashEmbedder(),
            baseline_embedder=HashEmbedder(),
            depth=5,
            work_dir=tmp_path / "work",
        )


def test_rerank_within_a_share_gives_a_row_per_budget(eval_data: Path, tmp_path: Path) -> None:
    """A share of 0 ms scores nothing (the found order stands); a share far past what the
    doubles take scores every candidate, as the full rerank does."""
    dataset = build_dataset(require_sources(eval_data), tmp_path / "corpus")
    report = evaluate(
        dataset,
        embedder=HashEmbedder(),
        baseline_embedder=HashEmbedder(),
        rerankers=[OverlapReranker()],
        rerank_candidates=6,
        rerank_budgets_ms=(0.0, 60_000.0),
        rerank_batch_size=2,
        top_k=4,
        depth=10,
        work_dir=tmp_path / "work",
    )
    vector = next(r for r in report.rows if r.kind == "vector")
    full = next(r for r in report.rows if r.kind == "rerank" and r.level == "full")
    none, every = [r for r in report.rows if r.kind == "rerank_budget"]
    assert (none.level, every.level) == ("0 ms", "60000 ms")
    assert none.scored_mean == 0.0 and none.scores == vector.scores
    assert every.scored_mean == 6.0 and every.scores == full.scores
    assert report.settings["rerank_budgets_ms"] == [0.0, 60_000.0]
    assert "| 6.0 |" in table(report)
