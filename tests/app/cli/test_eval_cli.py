"""``ragtime eval retrieval`` end to end on the tiny doc tree and the tiny Debian and Emacs FAQs,
with fast doubles (hash embedder, overlap reranker, word tokenizer); and its errors when the
data is missing or input is bad."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.cli import commands as cli
from app.cli import evaluation as eval_cli
from app.pipeline import services
from app.settings import Settings, get_settings
from inference import PromptAssembler
from retrieval import Passage
from retrieval.eval.sets import SETS
from retrieval.rerank.trained import RECORD_NAME, choose_reranker, record_evaluation
from tests.fakes.hash_embedder import HashEmbedder
from tests.fakes.rerankers import OverlapReranker
from tests.fakes.word_tokenizer import WordTokenizer
from tests.helpers.debian_faq_tree import write_faq
from tests.helpers.emacs_faq_tree import write_info
from tests.helpers.python_doc_tree import write_sources


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("RAGTIME_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(services, "default_embedder", lambda settings: HashEmbedder())
    monkeypatch.setattr(eval_cli, "_baseline_embedder", lambda settings: HashEmbedder())
    monkeypatch.setattr(
        eval_cli,
        "_rerankers",
        lambda settings, extra, say: [OverlapReranker(n) for n in extra or ["overlap-ce"]],
    )
    monkeypatch.setattr(
        eval_cli, "_packer", lambda settings: PromptAssembler(WordTokenizer(), context_tokens=200)
    )
    get_settings.cache_clear()
    yield tmp_path / "data"
    get_settings.cache_clear()


def test_missing_data_names_the_make_target(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["eval", "retrieval", "--dataset", "python-faq"]) == 1
    err = capsys.readouterr().err
    assert "make eval-data" in err and str(data_dir / "eval") in err


@pytest.mark.parametrize("dataset", ["debian-faq", "emacs-faq"])
def test_each_set_says_which_target_fetches_its_data(
    data_dir: Path, dataset: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_sources(data_dir / "eval")  # another set's data is no help
    assert cli.main(["eval", "retrieval", "--dataset", dataset]) == 1
    err = capsys.readouterr().err
    assert f"the {dataset} evaluation data is missing" in err and "make eval-data" in err


def test_the_choices_are_the_registered_sets() -> None:
    assert tuple(SETS) == eval_cli.DATASETS


@pytest.mark.parametrize(
    ("dataset", "write", "counts"),
    [
        ("debian-faq", write_faq, "5 questions, 8 documents"),
        ("emacs-faq", write_info, "3 questions, 6 documents"),
    ],
)
def test_eval_runs_on_the_faq_sets(
    data_dir: Path,
    tmp_path: Path,
    dataset: str,
    write: Callable[[Path], Path],
    counts: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write(tmp_path / "eval")
    out = tmp_path / f"{dataset}.json"
    argv = ["eval", "retrieval", "--dataset", dataset, "--data", str(tmp_path / "eval")]
    argv += ["--work-dir", str(tmp_path / "work"), "--mode", "hybrid", "--depth", "20"]
    assert cli.main([*argv, "--json", str(out)]) == 0
    assert f"{dataset}: {counts}" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["dataset"] == dataset and report["questions"] == int(counts.split()[0])
    vector = next(row for row in report["rows"] if row["kind"] == "vector")
    assert 0.0 < vector["scores"]["recall_at_10"] <= 1.0  # the answers were ingested and found
    assert (tmp_path / "work" / "corpus" / "faq-answers").is_dir()


def test_eval_runs_on_the_default_data_folder_and_writes_json(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_sources(data_dir / "eval")
    out = tmp_path / "faq.json"
    argv = ["eval", "retrieval", "--dataset", "python-faq", "--depth", "20", "--json", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "python-faq: 4 questions, 7 documents" in printed
    assert "| baseline: plain hash-embedder, 200-word chunks, exact search |" in printed
    report = json.loads(out.read_text())
    assert report["questions"] == 4
    assert [row["kind"] for row in report["rows"]][:5] == [
        "baseline",
        "vector",
        "rerank",
        "rerank",
        "rerank",
    ]  # 20 candidates, 10, and top_k 4
    assert set(report["rows"][0]["scores"]) == {
        "questions",
        "recall_at_1",
        "recall_at_5",
        "recall_at_10",
        "mrr_at_10",
        "ndcg_at_10",
    }
    assert report["settings"]["top_k"] == get_settings().top_k
    assert report["settings"]["chunk_tokens"] == get_settings().chunk_tokens
    assert (data_dir / "eval" / "work" / "store.json").exists()  # kept for the next run


def test_a_trained_rerankers_gain_is_written_into_its_record(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--reranker DIR`` of a model the trainer saved: the full rerank's nDCG@10 gain over
    vector order goes into its ``ragtime-training.json``, which ``choose_reranker`` reads
    before the trainer's own held-out figures."""
    write_sources(data_dir / "eval")
    model = data_dir / "models" / "reranker-docs"
    model.mkdir(parents=True)
    (model / RECORD_NAME).write_text(json.dumps({"heldout": {"gain_ndcg10": 0.2}}))
    out = tmp_path / "faq.json"
    argv = ["eval", "retrieval", "--dataset", "python-faq", "--reranker", str(model)]
    assert cli.main([*argv, "--depth", "20", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    vector = next(r for r in rows if r["kind"] == "vector")["scores"]["ndcg_at_10"]
    full = next(r for r in rows if r["kind"] == "rerank" and r["level"] == "full")
    assert full["model"] == str(model)
    record = json.loads((model / RECORD_NAME).read_text())
    assert record["heldout"] == {"gain_ndcg10": 0.2}  # the rest of the record is kept
    evaluation = record["evaluation"]
    assert evaluation["gain_ndcg10"] == round(full["scores"]["ndcg_at_10"] - vector, 4)
    assert evaluation["dataset"] == "python-faq" and evaluation["questions"] == 4
    assert "written to its record" in capsys.readouterr().err
    choice = choose_reranker("", data_dir / "models", "docs")
    assert ("(evaluation)" in choice.reason) or ("evaluation figures" in choice.reason)


def test_the_configured_chunking_is_evaluated(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RAGTIME_CHUNK_TOKENS reaches the evaluation's ingest: smaller chunks, more of them, and
    the kept store is rebuilt for them."""
    write_sources(data_dir / "eval")
    counts = {}
    for tokens in ("256", "16"):
        monkeypatch.setenv("RAGTIME_CHUNK_TOKENS", tokens)
        monkeypatch.setenv("RAGTIME_CHUNK_OVERLAP_TOKENS", "0")
        get_settings.cache_clear()
        out = tmp_path / f"faq-{tokens}.json"
        argv = ["eval", "retrieval", "--dataset", "python-faq", "--depth", "20"]
        assert cli.main([*argv, "--json", str(out)]) == 0
        report = json.loads(out.read_text())
        assert report["settings"]["chunk_tokens"] == int(tokens)
        counts[tokens] = report["ragtime_chunks"]
    assert counts["16"] > counts["256"]


def test_limit_and_data_flags(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_sources(tmp_path / "elsewhere")
    argv = [
        "eval",
        "retrieval",
        "--dataset",
        "python-faq",
        "--data",
        str(tmp_path / "elsewhere"),
        "--work-dir",
        str(tmp_path / "work"),
        "--limit",
        "2",
    ]
    assert cli.main(argv) == 0
    assert "python-faq: 2 questions" in capsys.readouterr().out
    assert (tmp_path / "work" / "corpus" / "faq-answers").is_dir()


def test_bad_arguments_are_refused(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["eval", "retrieval", "--dataset", "python-faq", "--depth", "3"]) == 2
    assert "--depth must be at least 10" in capsys.readouterr().err
    assert cli.main(["eval", "retrieval", "--dataset", "python-faq", "--sample", "1.5"]) == 2
    assert "--sample must be in (0, 1], got 1.5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["eval", "retrieval", "--dataset", "squad"])


def test_prompt_rows_need_the_llama_cpp_tokenizer() -> None:
    assert eval_cli._packer(Settings(generation_backend="null")) is None


@pytest.mark.slow
def test_prompt_rows_count_with_the_llama_cpp_models_tokenizer() -> None:
    packer = eval_cli._packer(Settings())
    passages = [Passage(i, "c", f"doc{i}.rst", "Title", "", "word " * 30, 1.0) for i in range(4)]
    full = packer.assemble("Which word?", passages, context_tokens=768)
    small = packer.assemble("Which word?", passages, context_tokens=64)
    assert len(full.passages) == 4
    assert 1 <= len(small.passages) < 4


def test_a_record_is_written_only_for_a_model_the_trainer_saved(tmp_path: Path) -> None:
    assert record_evaluation(tmp_path, {"gain_ndcg10": 0.1}) is False
    assert list(tmp_path.iterdir()) == []
