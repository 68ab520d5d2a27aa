"""API keys: created once, shown once, stored only as SHA-256 digests in SQLite.

Keys are 32 random bytes (``rt_`` + URL-safe base64), so a plain SHA-256 digest is enough to
make a stolen key file useless; a slow password hash would only slow every request down.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

KEY_PREFIX = "rt_"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE,
    hint TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT
)
"""


@dataclass(frozen=True)
class ApiKey:
    """A key as the service knows it: never the secret itself."""

    id: int
    name: str
    hint: str
    created_at: str
    revoked_at: str | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class KeyStore:
    """Create, list, revoke and verify API keys kept in one SQLite file."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute(_SCHEMA)
        self._db.commit()

    def close(self) -> None:
        self._db.close()

    def create(self, name: str) -> tuple[ApiKey, str]:
        """Make a new key; returns it with its secret, which is stored nowhere: shown once."""
        if not name.strip():
            raise ValueError("a key needs a non-empty name")
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        created = _now()
        hint = secret[:7] + "…"
        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO api_keys (name, digest, hint, created_at) VALUES (?, ?, ?, ?)",
                (name, _digest(secret), hint, created),
            )
        assert cur.lastrowid is not None
        return ApiKey(cur.lastrowid, name, hint, created, None), secret

    def list(self) -> list[ApiKey]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, name, hint, created_at, revoked_at FROM api_keys ORDER BY id"
            ).fetchall()
        return [ApiKey(*row) for row in rows]

    def revoke(self, key_id: int) -> bool:
        """Revoke key ``key_id``; False when there is no such active key."""
        with self._lock, self._db:
            cur = self._db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (_now(), key_id),
            )
        return cur.rowcount == 1

    def verify(self, secret: str) -> ApiKey | None:
        """The active key whose secret this is, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT id, name, hint, created_at, revoked_at FROM api_keys "
                "WHERE digest = ? AND revoked_at IS NULL",
                (_digest(secret),),
            ).fetchone()
        return ApiKey(*row) if row else None
