"""The `ragtime` CLI: keys, ingest (idempotent, reporting unreadable files), demo set-up."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import commands as cli
from app.pipeline import services
from app.settings import get_settings
from retrieval import DocumentStore
from tests.fakes.hash_embedder import HashEmbedder, hash_embedder_of
from tests.helpers.legacy_store import write_legacy_collection
from tests.helpers.processes import run_ingest


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The data dir of the CLI's settings. The CLI embeds with ``HashEmbedder`` here: these
    tests check what it reports and writes, not what MiniLM makes of the text."""
    monkeypatch.setenv("RAGTIME_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(services, "default_embedder", lambda settings: HashEmbedder())
    get_settings.cache_clear()
    yield tmp_path / "data"
    get_settings.cache_clear()


def test_keys_create_list_revoke(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["keys", "create", "ops"]) == 0
    secret = capsys.readouterr().out.strip()
    assert secret.startswith("rt_")
    assert cli.main(["keys", "list"]) == 0
    listing = capsys.readouterr().out
    assert "\tops\t" in listing and "active" in listing and secret not in listing
    assert cli.main(["keys", "revoke", "1"]) == 0
    assert cli.main(["keys", "revoke", "1"]) == 1
    assert "no active key with id 1" in capsys.readouterr().err


def test_ingest_reports_unreadable_files_and_goes_on(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.md").write_text("# Lists\n\nA list holds items in order.\n")
    (docs / "bad.txt").write_bytes(b"\xff\xfe\x00 not utf-8 \xc3\x28")
    assert cli.main(["ingest", str(docs), "--collection", "notes"]) == 0
    captured = capsys.readouterr()
    assert "ingested 1 file(s)" in captured.out
    assert "failed: bad.txt" in captured.err
    assert "files 2/2, 1 chunks, " in captured.err and " left" in captured.err  # progress
    assert cli.main(["ingest", str(docs), "--collection", "notes"]) == 0
    store = DocumentStore(data_dir / "store")
    store.open()
    assert store.collections() == {"notes": 1}
    store.close()
    assert cli.main(["ingest", str(tmp_path / "missing")]) == 1


@pytest.fixture
def one_file_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI's demo corpus cut to one file."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(cli.DEMO_CORPUS / "tutorial" / "appetite.rst.txt", corpus)
    monkeypatch.setattr(cli, "DEMO_CORPUS", corpus)
    return corpus


def test_setup_demo_runs_once(
    data_dir: Path, one_file_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["setup-demo"]) == 0
    first = capsys.readouterr()
    key = (data_dir / "demo-api-key").read_text().strip()
    assert key in first.out and "ingested 1 file(s)" in first.out
    assert cli.main(["setup-demo"]) == 0
    second = capsys.readouterr()
    assert "ingested" not in second.out and key not in second.out


@pytest.mark.parametrize(
    "argv", [["bench"], ["bench", "load", "--url", "http://127.0.0.1:1"], ["bench", "--help"]]
)
def test_bench_without_the_extra_says_how_to_get_it(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "bench.cli", None)  # ``import bench.cli`` fails
    assert cli.main(argv) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "pip install -e '.[bench]'" in captured.err


def test_bench_with_the_extra_registers_its_subcommands() -> None:
    parser = cli.build_parser()
    args = parser.parse_args(["bench", "machinery", "--iterations", "1"])
    assert args.func is not cli.cmd_bench_missing


def test_ingest_rebuild_changes_a_collections_embedding_backend(
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "lists.md").write_text("# Lists\n\nA list holds items in order.\n")
    (docs / "dicts.md").write_text("# Dicts\n\nA dict maps keys to values.\n")
    assert cli.main(["ingest", str(docs), "--collection", "notes"]) == 0  # torch
    monkeypatch.setenv("RAGTIME_EMBEDDING_BACKEND", "onnx-int8")
    monkeypatch.setattr(services, "default_embedder", hash_embedder_of)
    get_settings.cache_clear()
    (docs / "lists.md").write_text("# Lists\n\nA list holds items in order, and more.\n")
    # An existing collection keeps the backend that built it: no refusal, no rebuild.
    assert cli.main(["ingest", str(docs / "lists.md"), "--collection", "notes"]) == 0
    store = DocumentStore(data_dir / "store")
    store.open()
    assert store.embedding_backend_of("notes") == "torch"
    assert store.sources("notes") == ["dicts.md", "lists.md"]
    store.close()
    assert cli.main(["ingest", str(docs / "lists.md"), "--collection", "notes", "--rebuild"]) == 0
    assert "rebuilding 'notes' from nothing" in capsys.readouterr().err
    store = DocumentStore(data_dir / "store")
    store.open()
    assert store.sources("notes") == ["lists.md"]
    assert store.embedding_backend_of("notes") == "onnx-int8"
    store.close()


def test_setup_demo_keeps_a_demo_of_other_vectors(
    data_dir: Path,
    one_file_demo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A demo built by another backend is served with its own: nothing to rebuild."""
    assert cli.main(["setup-demo"]) == 0  # torch
    monkeypatch.setenv("RAGTIME_EMBEDDING_BACKEND", "onnx-int8")
    monkeypatch.setattr(services, "default_embedder", hash_embedder_of)
    get_settings.cache_clear()
    capsys.readouterr()
    assert cli.main(["setup-demo"]) == 0
    assert "ingested" not in capsys.readouterr().out
    store = DocumentStore(data_dir / "store")
    store.open()
    assert store.embedding_backend_of("demo") == "torch"
    store.close()


def test_setup_demo_over_the_old_store_layout_migrates_it(
    data_dir: Path, one_file_demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A data dir from before snapshots keeps its demo collection: migrated, not re-ingested."""
    texts = ["Python is an easy to learn, powerful programming language."]
    write_legacy_collection(
        data_dir / "store", "demo", [("appetite.rst.txt", texts[0])], HashEmbedder().embed(texts)
    )
    assert cli.main(["setup-demo"]) == 0
    assert "ingested" not in capsys.readouterr().out
    store = DocumentStore(data_dir / "store")
    store.open()
    assert store.collections() == {"demo": 1}
    store.close()
    assert (data_dir / "store" / "legacy-backup" / "chunks.sqlite3").is_file()
    assert cli.main(["ingest", str(one_file_demo), "--collection", "demo"]) == 0
    assert "0 added, 1 changed" in capsys.readouterr().out  # no hash was known: embedded once


def test_reranker_train_on_a_missing_collection_says_so(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Lists\n\nA list holds items in order.\n")
    assert cli.main(["ingest", str(docs), "--collection", "notes"]) == 0
    capsys.readouterr()
    assert cli.main(["reranker", "train", "--collection", "nope"]) == 1
    err = capsys.readouterr().err
    assert "collection 'nope' holds no chunks" in err and "known: notes" in err
    assert "ragtime ingest PATH --collection nope" in err
    assert not (data_dir / "models" / "reranker-nope").exists()
    # A collection asked for more pairs is checked the same way, before any work.
    argv = ["reranker", "train", "--collection", "notes", "--also-collection", "debian-faq"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "collection 'debian-faq' holds no chunks" in err
    assert not (data_dir / "models" / "reranker-notes").exists()


def test_reranker_train_rejects_bad_options_and_missing_question_files(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "questions.txt"
    argv = ["reranker", "train", "--collection", "notes", "--exclude-questions", str(missing)]
    assert cli.main(argv) == 1
    assert f"--exclude-questions {missing}: No such file" in capsys.readouterr().err
    assert cli.main(["reranker", "train", "--collection", "notes", "--holdout", "1.5"]) == 2
    assert "holdout must be a share between 0 and 1" in capsys.readouterr().err
    assert cli.main(["reranker", "train", "--collection", "notes", "--eval-every", "-5"]) == 2
    assert "eval_every must be 0 (off) or more, got -5" in capsys.readouterr().err


@pytest.mark.process
def test_an_ingest_prints_no_library_loader_lines(tmp_path: Path) -> None:
    """A CLI process, as a user runs it: faiss's loader used to tell, at every start, how it
    looked for its AVX builds (a ``ModuleNotFoundError`` among them)."""
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nLists hold items in order.\n")
    done = run_ingest(tmp_path / "data", folder)
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert "ingested 1 file(s)" in output
    assert "faiss.loader" not in output and "ModuleNotFoundError" not in output, output
