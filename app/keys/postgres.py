"""API keys in PostgreSQL (``RAGTIME_DATABASE_URL``), shared by every replica: a key created or
revoked through one is seen by all at their next request.

The rules and the hashing are ``app.keys.auth.BaseKeyStore``'s; this module keeps the table. The
connection (psycopg 3, autocommit) is opened at first use, so the service starts while the
database is down; a call that finds the connection broken reconnects once, and when that fails
too raises ``KeyStoreUnavailable`` (the app answers 503). Replicas that start at once create the
table under an advisory lock. Every replica needs the same ``RAGTIME_KEY_SECRET``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import psycopg

from app.keys.auth import KEY_COLUMNS, BaseKeyStore, KeyStoreUnavailable

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL,
    digest TEXT NOT NULL UNIQUE,
    hint TEXT NOT NULL,
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    scopes TEXT,
    collections TEXT
)
"""
#: Any number of ours, for ``pg_advisory_xact_lock``: replicas create the table one at a time.
_SCHEMA_LOCK = 0x72616774  # "ragt"
CONNECT_TIMEOUT_S = 5

T = TypeVar("T")


class PostgresKeyStore(BaseKeyStore):
    """The keys in a PostgreSQL table ``api_keys``."""

    def __init__(self, url: str, *, secret: bytes) -> None:
        super().__init__(secret)
        self._url = url
        self._lock = threading.Lock()
        self._db: psycopg.Connection[Any] | None = None

    def open(self) -> None:
        """Nothing: the connection is made at its first use, on a worker thread, and made again
        after a failure, so a database down at start-up only answers 503 until it is back."""

    def _connect(self) -> psycopg.Connection[Any]:
        db = psycopg.connect(self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            db.execute(_SCHEMA)
        return db

    def _run(self, work: Callable[[psycopg.Connection[Any]], T]) -> T:
        """``work`` on the connection (made or remade as needed), under the lock."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._db is None or self._db.closed:
                        self._db = self._connect()
                    return work(self._db)
                except psycopg.OperationalError as exc:
                    if self._db is not None:
                        self._db.close()
                    self._db = None
                    if attempt == 2:
                        # The URL may hold a password: name the failure, not the URL.
                        raise KeyStoreUnavailable(
                            f"the key database cannot be reached ({type(exc).__name__})"
                        ) from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _insert(self, row: tuple[str, str, str, str, str, str | None]) -> int:
        def insert(db: psycopg.Connection[Any]) -> int:
            found = db.execute(
                "INSERT INTO api_keys (name, digest, hint, created_at, scopes, collections) "
                "VALUES (%s, %s, %s, %s, %s, %s) RETURNING id",
                row,
            ).fetchone()
            assert found is not None
            return int(found[0])

        return self._run(insert)

    def _rows(self) -> list[Sequence[Any]]:
        return self._run(
            lambda db: list(
                db.execute(f"SELECT {KEY_COLUMNS} FROM api_keys ORDER BY id").fetchall()
            )
        )

    def _revoke(self, key_id: int, when: str) -> bool:
        def revoke(db: psycopg.Connection[Any]) -> bool:
            cur = db.execute(
                "UPDATE api_keys SET revoked_at = %s WHERE id = %s AND revoked_at IS NULL",
                (when, key_id),
            )
            return cur.rowcount == 1

        return self._run(revoke)

    def _find(self, digests: tuple[str, str]) -> Sequence[Any] | None:
        return self._run(
            lambda db: db.execute(
                f"SELECT {KEY_COLUMNS}, digest FROM api_keys "
                "WHERE digest IN (%s, %s) AND revoked_at IS NULL",
                digests,
            ).fetchone()
        )

    def _set_digest(self, key_id: int, new: str, old: str) -> None:
        self._run(
            lambda db: db.execute(
                "UPDATE api_keys SET digest = %s WHERE id = %s AND digest = %s",
                (new, key_id, old),
            )
        )
