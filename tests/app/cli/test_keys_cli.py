"""``ragtime keys create NAME --scope S --collection C``: scoped keys from the command line, and
the demo key, which is the operator's (every scope, every collection)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.cli import commands as cli
from app.keys.auth import KeyStore
from app.settings import get_settings


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("RAGTIME_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    yield tmp_path / "data"
    get_settings.cache_clear()


def _verified(data_dir: Path, secret: str) -> tuple[frozenset[str], frozenset[str] | None]:
    keys = KeyStore(data_dir / "keys.sqlite3")
    try:
        key = keys.verify(secret)
    finally:
        keys.close()
    assert key is not None
    return key.scopes, key.collections


def test_keys_create_with_scopes_and_collections(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["keys", "create", "tenant-a", "--scope", "ask", "--scope", "ingest"]
    assert cli.main([*argv, "--collection", "docs", "--collection", "faq"]) == 0
    out = capsys.readouterr()
    secret = out.out.strip()
    assert "scopes=ask,ingest collections=docs,faq" in out.err
    assert _verified(data_dir, secret) == ({"ask", "ingest"}, {"docs", "faq"})
    assert cli.main(["keys", "create", "reader"]) == 0
    reader = capsys.readouterr().out.strip()
    assert _verified(data_dir, reader) == ({"ask"}, None)  # defaults: ask, every collection
    assert cli.main(["keys", "list"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].endswith("scopes=ask,ingest collections=docs,faq")
    assert listing[1].endswith("scopes=ask collections=*")
    assert (data_dir / "key-secret").exists()


def test_keys_create_refuses_an_unknown_scope(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["keys", "create", "x", "--scope", "root"])
    assert exited.value.code == 2
    assert "invalid choice: 'root'" in capsys.readouterr().err
    assert KeyStore(data_dir / "keys.sqlite3").list() == []


def test_keys_create_refuses_an_empty_name(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["keys", "create", " "]) == 2
    assert "error: a key needs a non-empty name" in capsys.readouterr().err
