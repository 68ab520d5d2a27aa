"""API keys in a real PostgreSQL (``RAGTIME_DATABASE_URL``): the same rules as SQLite, shared
by replicas, and a 503 (not a 500, not a 401) while the database is down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.cli import commands as cli
from app.keys.auth import KeyStoreUnavailable
from app.keys.postgres import PostgresKeyStore
from app.keys.stores import open_key_store
from app.settings import get_settings
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import make_settings, running_app
from tests.helpers.ports import free_port
from tests.helpers.postgres_server import postgres_bin, postgres_serving

SECRET = b"a-shared-server-secret-of-at-least-32"


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    if postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed (`make test` installs Debian's postgresql)")
    with postgres_serving() as url:
        yield url


@pytest.mark.process
def test_keys_live_in_postgres_and_replicas_share_them(database_url: str) -> None:
    one = PostgresKeyStore(database_url, secret=SECRET)
    two = PostgresKeyStore(database_url, secret=SECRET)
    try:
        key, secret = one.create("tenant", scopes=["ask", "ingest"], collections=["docs"])
        assert two.verify(secret) == key
        assert key.scopes == {"ask", "ingest"} and key.collections == {"docs"}
        assert two.verify(secret + "x") is None
        assert "tenant" in [k.name for k in two.list()]
        assert two.revoke(key.id) and not one.revoke(key.id)
        assert one.verify(secret) is None  # revoked through the other replica: at once
        other = PostgresKeyStore(database_url, secret=b"another-secret-of-32-characters!!")
        _, live = one.create("live")
        assert other.verify(live) is None
        other.close()
    finally:
        one.close()
        two.close()


@pytest.mark.process
def test_a_lost_connection_is_remade(database_url: str) -> None:
    keys = PostgresKeyStore(database_url, secret=SECRET)
    key, secret = keys.create("reconnect")
    assert keys._db is not None
    keys._db.close()  # as a database restart would leave it
    assert keys.verify(secret) == key
    keys.close()


@pytest.mark.process
def test_the_app_checks_keys_in_postgres(tmp_path: Path, database_url: str) -> None:
    settings = make_settings(tmp_path, database_url=database_url, key_secret=SECRET.decode())
    keys = open_key_store(settings)
    assert isinstance(keys, PostgresKeyStore)
    _, secret = keys.create("app", scopes=["ask"])
    keys.close()
    overrides: dict[str, Any] = {"database_url": database_url, "key_secret": SECRET.decode()}
    with running_app(tmp_path, backend=ScriptedBackend(), **overrides) as client:
        good = client.get("/v1/collections", headers={"Authorization": f"Bearer {secret}"})
        bad = client.get("/v1/collections", headers={"Authorization": "Bearer rt_nope"})
    assert good.status_code == 200
    assert bad.status_code == 401
    assert not (tmp_path / "keys.sqlite3").exists()


def test_a_database_that_is_down_is_503_not_401(tmp_path: Path) -> None:
    down = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    keys = PostgresKeyStore(down, secret=SECRET)
    with pytest.raises(KeyStoreUnavailable, match="cannot be reached"):
        keys.verify("rt_anything")
    overrides: dict[str, Any] = {"database_url": down, "key_secret": SECRET.decode()}
    with running_app(tmp_path, backend=ScriptedBackend(), **overrides) as client:
        response = client.get("/v1/collections", headers={"Authorization": "Bearer rt_x"})
        ready = client.get("/readyz", headers={"Authorization": "Bearer rt_x"})
    assert response.status_code == 503
    assert response.headers["retry-after"]
    error = response.json()["error"]
    assert error["type"] == "key_store_unavailable"
    assert "127.0.0.1" not in error["message"]  # the URL (and any password) is not told
    assert ready.json() == {"ready": False}


def test_a_database_needs_a_shared_key_secret(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="database_url needs key_secret"):
        make_settings(tmp_path, database_url="postgresql://db/ragtime")


@pytest.mark.process
def test_keys_cli_uses_the_database(
    tmp_path: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RAGTIME_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RAGTIME_DATABASE_URL", database_url)
    monkeypatch.setenv("RAGTIME_KEY_SECRET", SECRET.decode())
    get_settings.cache_clear()
    try:
        assert cli.main(["keys", "create", "from-cli", "--scope", "admin"]) == 0
        secret = capsys.readouterr().out.strip()
        keys = PostgresKeyStore(database_url, secret=SECRET)
        key = keys.verify(secret)
        keys.close()
        assert key is not None and key.name == "from-cli" and key.scopes == {"admin"}
        assert not (tmp_path / "keys.sqlite3").exists()
        monkeypatch.setenv("RAGTIME_DATABASE_URL", f"postgresql://127.0.0.1:{free_port()}/x")
        get_settings.cache_clear()
        assert cli.main(["keys", "list"]) == 1
        assert "error: the key database cannot be reached" in capsys.readouterr().err
    finally:
        get_settings.cache_clear()
