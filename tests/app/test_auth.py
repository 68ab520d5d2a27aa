"""API keys: shown once, stored hashed, verified, revoked."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from app.auth import KeyStore


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
