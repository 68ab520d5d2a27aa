"""A user's mistakes at the command line are one line on stderr, no traceback, and the exit
status docs/cli.md documents (issue 43 §4): asking with no server running, a bad ``RAGTIME_*``
setting, an ingest of nothing, Ctrl-C in an ingest."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from app.cli import commands as cli
from app.pipeline import services
from app.settings import get_settings
from retrieval import DocumentStore
from tests.fakes.hash_embedder import HashEmbedder
from tests.helpers.ports import free_port


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The CLI's data dir, embedding with ``HashEmbedder``; no ``RAGTIME_API_KEY``."""
    monkeypatch.setenv("RAGTIME_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("RAGTIME_API_KEY", raising=False)
    monkeypatch.setattr(services, "default_embedder", lambda settings: HashEmbedder())
    get_settings.cache_clear()
    yield tmp_path / "data"
    get_settings.cache_clear()


def error_lines(err: str) -> list[str]:
    """stderr's lines, checked to hold no traceback."""
    assert "Traceback" not in err, err
    return err.splitlines()


def test_ask_with_no_server_names_the_url_and_what_to_do(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert cli.main(["ask", "--url", url, "--key", "rt_x", "What is a list?"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert error_lines(captured.err) == [
        f"error: no ragtime server answers at {url} (connection refused): start one with "
        "`ragtime serve` (or `make serve`), or point --url at one"
    ]


def test_ask_tries_the_configured_port(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    monkeypatch.setenv("PORT", str(port))
    assert cli.main(["ask", "--key", "rt_x", "What is a list?"]) == 1
    (line,) = error_lines(capsys.readouterr().err)
    assert line.startswith(f"error: no ragtime server answers at http://127.0.0.1:{port} ")


def test_ask_without_a_key_or_with_a_malformed_url(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["ask", "What is a list?"]) == 1
    assert error_lines(capsys.readouterr().err) == [
        "error: no API key: pass --key, set RAGTIME_API_KEY, or run `ragtime setup-demo` once"
    ]
    assert cli.main(["ask", "--url", "localhost:8000", "--key", "rt_x", "hi"]) == 2
    assert error_lines(capsys.readouterr().err) == [
        "error: --url 'localhost:8000' is not an http(s) URL"
    ]


@pytest.mark.parametrize(
    ("environment", "lines"),
    [
        (
            {"RAGTIME_TOP_K": "abc"},
            ["error: RAGTIME_TOP_K='abc': should be a valid integer, unable to parse string as an "
             "integer"],
        ),
        (
            {"RAGTIME_TOP_K": "0", "RAGTIME_EMBEDDING_BACKEND": "gpu"},
            [
                "error: RAGTIME_EMBEDDING_BACKEND='gpu': should be 'torch', 'onnx' or 'onnx-int8'",
                "error: RAGTIME_TOP_K='0': should be greater than or equal to 1",
            ],
        ),
        (
            {"RAGTIME_TOP_K": "50", "RAGTIME_MAX_TOP_K": "20"},
            ["error: invalid settings: RAGTIME_TOP_K (50) must not exceed RAGTIME_MAX_TOP_K (20)"],
        ),
        (
            {"RAGTIME_DATABASE_URL": "postgresql://ragtime:hunter2@db/ragtime"},
            ["error: invalid settings: RAGTIME_DATABASE_URL needs RAGTIME_KEY_SECRET: every "
             "replica that shares the key database must hash keys with the same secret (set "
             "RAGTIME_KEY_SECRET)"],
        ),
        (
            {"RAGTIME_MODEL_POOLS": "{small: 1"},
            ["error: RAGTIME_MODEL_POOLS='{small: 1': should be JSON (Expecting property "
             "name enclosed in double quotes: line 1 column 2 (char 1))"],
        ),
    ],
)  # fmt: skip
def test_a_bad_setting_is_one_line_naming_its_variable(
    environment: dict[str, str],
    lines: list[str],
    data_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["ask", "--key", "rt_x", "What is a list?"]) == 1
    err = capsys.readouterr().err
    assert sorted(error_lines(err)) == lines
    assert "hunter2" not in err


def test_ingest_of_an_empty_folder_is_an_error_that_makes_nothing(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".hidden.md").write_text("# Hidden\n\nleft out\n")
    assert cli.main(["ingest", str(empty), "--collection", "notes"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert error_lines(captured.err) == [f"error: {empty} holds no files: nothing to ingest"]
    assert not data_dir.exists()  # no store, no collection, no snapshot


def test_ingest_of_a_folder_of_no_supported_file_names_the_formats(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "lists.md").write_text("# Lists\n\nA list holds items in order.\n")
    assert cli.main(["ingest", str(docs), "--collection", "notes"]) == 0
    capsys.readouterr()
    other = tmp_path / "binaries"
    other.mkdir()
    (other / "a.bin").write_bytes(b"\x00")
    (other / "b.xyz").write_text("what is this\n")
    for path in (other, other / "a.bin"):
        assert cli.main(["ingest", str(path), "--collection", "notes"]) == 1
        (line,) = error_lines(capsys.readouterr().err)
        assert line.startswith(f"error: {path} ")
        assert "none of a format ingest reads (" in line or "is not of a format" in line
        assert ".md" in line and ".pdf" in line and ".docx" in line
    store = DocumentStore(data_dir / "store")
    store.open()
    try:
        assert store.collections() == {"notes": 1}
        assert store.snapshot("notes").version == "v000001"  # type: ignore[union-attr]
    finally:
        store.close()


class InterruptedEmbedder(HashEmbedder):
    """Ctrl-C while embedding: ``KeyboardInterrupt`` from the first ``embed``."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise KeyboardInterrupt


def test_ctrl_c_in_an_ingest_ends_it_in_one_line_and_loses_nothing(
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "lists.md").write_text("# Lists\n\nA list holds items in order.\n")
    assert cli.main(["ingest", str(docs), "--collection", "notes"]) == 0
    capsys.readouterr()
    (docs / "lists.md").write_text("# Lists\n\nA list holds items in order, and more.\n")
    (docs / "dicts.md").write_text("# Dicts\n\nA dict maps keys to values.\n")
    monkeypatch.setattr(services, "default_embedder", lambda settings: InterruptedEmbedder())
    assert cli.main(["ingest", str(docs), "--collection", "notes"]) == 130
    captured = capsys.readouterr()
    assert error_lines(captured.err)[-1] == "interrupted"
    assert "ingested" not in captured.out
    assert not list((data_dir / "store").rglob(".building-*"))  # the staged snapshot is gone
    store = DocumentStore(data_dir / "store")
    store.open()
    try:
        assert store.sources("notes") == ["lists.md"]  # as before the interrupted ingest
    finally:
        store.close()
    monkeypatch.setattr(services, "default_embedder", lambda settings: HashEmbedder())
    assert cli.main(["ingest", str(docs), "--collection", "notes"]) == 0  # the store is usable
    assert "1 added, 1 changed" in capsys.readouterr().out
