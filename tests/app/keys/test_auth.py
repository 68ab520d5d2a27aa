"""API keys: shown once, stored hashed, verified, revoked."""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
from pathlib import Path

import pytest

from app.keys.auth import LEGACY_SCOPES, SCOPES, SECRET_FILE, KeyStore
from tests.helpers.app import make_settings


def test_keys_are_stored_as_digests_and_verified(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.sqlite3")
    key, secret = keys.create("alice")
    assert secret.startswith("rt_") and len(secret) > 40
    assert keys.verify(secret) == key
    assert keys.verify(secret + "x") is None
    keys.close()
    raw = sqlite3.connect(tmp_path / "keys.sqlite3").execute("SELECT * FROM api_keys").fetchall()
    assert secret not in repr(raw)


def test_revoked_keys_stop_verifying_and_are_listed_as_such(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.sqlite3")
    first, first_secret = keys.create("a")
    _, second_secret = keys.create("b")
    assert keys.revoke(first.id)
    assert not keys.revoke(first.id)
    assert not keys.revoke(999)
    assert keys.verify(first_secret) is None
    assert keys.verify(second_secret) is not None
    listed = keys.list()
    assert [k.name for k in listed] == ["a", "b"]
    assert [k.active for k in listed] == [False, True]


def test_a_key_needs_a_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="non-empty name"):
        KeyStore(tmp_path / "k.sqlite3").create("  ")


def _digests(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return [row[0] for row in db.execute("SELECT digest FROM api_keys ORDER BY id")]
    finally:
        db.close()


def test_keys_are_hmac_digests_under_a_server_secret_made_at_first_run(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.sqlite3")
    _, secret = keys.create("alice")
    keys.close()
    made = tmp_path / SECRET_FILE
    assert made.stat().st_mode & 0o777 == 0o600
    assert len(made.read_text().strip()) == 64
    [digest] = _digests(tmp_path / "keys.sqlite3")
    assert digest.startswith("hmac-sha256$")
    assert hashlib.sha256(secret.encode()).hexdigest() not in digest
    # The same secret file: the key verifies; another server secret: the digest is worthless.
    assert KeyStore(tmp_path / "keys.sqlite3").verify(secret) is not None
    other = KeyStore(tmp_path / "keys.sqlite3", secret=b"another-server-secret-of-32-chars!")
    assert other.verify(secret) is None
    assert made.read_text() == (tmp_path / SECRET_FILE).read_text()


def test_the_configured_secret_is_used_and_no_file_is_made(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, key_secret="s" * 40)
    keys = KeyStore.for_settings(settings)
    _, secret = keys.create("bob")
    assert not (tmp_path / SECRET_FILE).exists()
    assert KeyStore(settings.keys_path, secret=b"s" * 40).verify(secret) is not None


def test_a_short_secret_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / SECRET_FILE).write_text("short\n")
    with pytest.raises(ValueError, match="at least 32 characters"):
        KeyStore(tmp_path / "keys.sqlite3").open()


def test_keys_carry_scopes_and_collections(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.sqlite3")
    tenant, tenant_secret = keys.create("t", scopes=["ask", "ingest"], collections=["docs"])
    operator, operator_secret = keys.create("op", scopes=SCOPES)
    assert keys.verify(tenant_secret) == tenant
    assert tenant.scopes == {"ask", "ingest"} and tenant.collections == {"docs"}
    assert tenant.may_read("docs") and not tenant.may_read("other")
    assert tenant.readable(["other", "docs"]) == ["docs"]
    assert keys.verify(operator_secret) == operator
    assert operator.collections is None and operator.may_read("anything")
    assert [k.describe() for k in keys.list()] == [
        "scopes=ask,ingest collections=docs",
        "scopes=ask,ingest,admin collections=*",
    ]
    assert keys.create("plain")[0].scopes == {"ask"}


@pytest.mark.parametrize(
    ("scopes", "message"),
    [(["ask", "root"], r"unknown scope\(s\) \['root'\]"), ([], "at least one scope")],
)
def test_a_key_needs_known_scopes(tmp_path: Path, scopes: list[str], message: str) -> None:
    keys = KeyStore(tmp_path / "keys.sqlite3")
    with pytest.raises(ValueError, match=message):
        keys.create("x", scopes=scopes)
    assert keys.list() == []


def test_a_legacy_sha256_row_verifies_keeps_ask_and_admin_and_is_upgraded(tmp_path: Path) -> None:
    """A key file from before scopes: the old schema, a plain SHA-256 digest."""
    path = tmp_path / "keys.sqlite3"
    secret = "rt_" + "legacy" * 8
    db = sqlite3.connect(path)
    db.execute(
        "CREATE TABLE api_keys (id INTEGER PRIMARY KEY, name TEXT NOT NULL, digest TEXT NOT NULL "
        "UNIQUE, hint TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT)"
    )
    db.execute(
        "INSERT INTO api_keys (name, digest, hint, created_at) VALUES (?, ?, ?, ?)",
        ("old", hashlib.sha256(secret.encode()).hexdigest(), secret[:7], "2026-01-01T00:00:00"),
    )
    db.commit()
    db.close()
    keys = KeyStore(path)
    key = keys.verify(secret)
    assert key is not None and key.name == "old"
    assert key.scopes == LEGACY_SCOPES == {"ask", "admin"} and key.collections is None
    [digest] = _digests(path)
    assert digest.startswith("hmac-sha256$")  # upgraded at first use
    assert keys.verify(secret) == key
    assert keys.verify(secret + "x") is None
    assert keys.revoke(key.id) and keys.verify(secret) is None


def test_digests_are_compared_in_constant_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    compared: list[tuple[str, str]] = []
    real = hmac.compare_digest

    def recording(a: str, b: str) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)
    keys = KeyStore(tmp_path / "keys.sqlite3")
    key, secret = keys.create("timed")
    assert keys.verify(secret) == key
    assert compared and compared[-1][0] == compared[-1][1]


def test_try_verify_answers_at_once_what_verify_would(tmp_path: Path) -> None:
    """The event loop's lookup: the same answers as ``verify``, and a revocation made through
    another connection (another process) counts at once."""
    keys = KeyStore(tmp_path / "keys.sqlite3")
    key, secret = keys.create("alice")
    assert keys.try_verify(secret) == (True, key)
    assert keys.try_verify(secret + "x") == (True, None)
    other = KeyStore(tmp_path / "keys.sqlite3")
    assert other.revoke(key.id)
    assert keys.try_verify(secret) == (True, None)


def test_try_verify_gives_up_while_a_writer_holds_the_file(tmp_path: Path) -> None:
    """It never waits: with the file locked by a writer it says so, and ``verify_key`` then
    waits on a worker thread for the writer to finish."""
    import asyncio
    import threading

    from app.http.deps import verify_key

    path = tmp_path / "keys.sqlite3"
    keys = KeyStore(path)
    key, secret = keys.create("alice")
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN EXCLUSIVE")
    assert keys.try_verify(secret) == (False, None)
    threading.Timer(0.3, writer.execute, ("COMMIT",)).start()
    assert asyncio.run(verify_key(keys, secret)) == key
    assert keys.try_verify(secret) == (True, key)
    writer.close()


def test_try_verify_leaves_a_legacy_digest_to_verify(tmp_path: Path) -> None:
    """Rewriting a legacy digest is a write: ``try_verify`` leaves it to ``verify``, off the
    loop; once rewritten the key is found at once."""
    path = tmp_path / "keys.sqlite3"
    keys = KeyStore(path)
    key, secret = keys.create("old")
    db = sqlite3.connect(path)
    with db:
        db.execute(
            "UPDATE api_keys SET digest = ? WHERE id = ?",
            (hashlib.sha256(secret.encode()).hexdigest(), key.id),
        )
    db.close()
    assert keys.try_verify(secret) == (False, None)
    assert keys.verify(secret) == key
    assert keys.try_verify(secret) == (True, key)
