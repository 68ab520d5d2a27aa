"""API keys: created once, shown once, stored only as keyed digests; scoped to what they may do
and to the collections they may read.

A key is 32 random bytes (``rt_`` + URL-safe base64). The store keeps ``HMAC-SHA256(server
secret, key)``, never the key: a copy of the key file without the server secret (setting
``RAGTIME_KEY_SECRET``, else ``key-secret`` in the data dir, generated at first run, mode 0600)
cannot be checked against guesses. The row is found by its digest (an index lookup on a keyed
hash teaches a timing attacker nothing he could compute himself), then the digest is compared
with ``hmac.compare_digest``. A slow password hash would only slow every request: the keys are
random, not chosen by people.

Rows written before scopes existed (a plain SHA-256 digest, no scopes) still verify; the first
time one does, its digest is rewritten as the HMAC. Such a key keeps what it could do before:
``ask`` and ``admin`` on every collection, never ``ingest``, which did not exist.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.settings import Settings

KEY_PREFIX = "rt_"
#: What a key may do: ask (``/v1/ask``, ``/v1/search``, the OpenAI face), ingest (upload
#: documents), admin (alerts, the budget model, what ``/readyz`` holds).
SCOPES = ("ask", "ingest", "admin")
#: The scopes of a row from before scopes existed: what every key could do then.
LEGACY_SCOPES = frozenset({"ask", "admin"})
SECRET_FILE = "key-secret"
_HMAC_TAG = "hmac-sha256$"

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
#: Columns added since the first schema: NULL in older rows (legacy scopes, every collection).
_ADDED_COLUMNS = {"scopes": "TEXT", "collections": "TEXT"}
KEY_COLUMNS = "id, name, hint, created_at, revoked_at, scopes, collections"
#: The active key (and its digest) whose digest is one of two.
_FIND_ACTIVE = (
    f"SELECT {KEY_COLUMNS}, digest FROM api_keys WHERE digest IN (?, ?) AND revoked_at IS NULL"
)


@dataclass(frozen=True)
class ApiKey:
    """A key as the service knows it: never the secret itself. ``collections`` None: every
    collection."""

    id: int
    name: str
    hint: str
    created_at: str
    revoked_at: str | None
    scopes: frozenset[str] = frozenset(SCOPES)
    collections: frozenset[str] | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def may_read(self, collection: str) -> bool:
        return self.collections is None or collection in self.collections

    def readable(self, names: Iterable[str]) -> list[str]:
        """Those of ``names`` this key may read."""
        return [name for name in names if self.may_read(name)]

    def describe(self) -> str:
        """Scopes and collections, as ``keys list`` prints them."""
        shown = "*" if self.collections is None else ",".join(sorted(self.collections)) or "-"
        return f"scopes={','.join(s for s in SCOPES if s in self.scopes)} collections={shown}"


def _legacy_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def load_or_create_secret(path: Path) -> bytes:
    """The server secret kept in ``path``; made (32 random bytes, hex, mode 0600) when absent.
    Two processes starting at once agree: the file appears whole, by a hard link, or not."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            tmp.unlink()
    secret = path.read_text().strip().encode()
    if len(secret) < 32:
        raise ValueError(f"{path}: the key secret must be at least 32 characters")
    return secret


def check_scopes(scopes: Iterable[str]) -> frozenset[str]:
    chosen = frozenset(scopes)
    unknown = chosen - set(SCOPES)
    if unknown:
        raise ValueError(f"unknown scope(s) {sorted(unknown)}: choose from {list(SCOPES)}")
    if not chosen:
        raise ValueError(f"a key needs at least one scope of {list(SCOPES)}")
    return chosen


class KeyStoreUnavailable(Exception):
    """The key store cannot be reached (a database down): the app answers 503."""


class BaseKeyStore(ABC):
    """Create, list, revoke and verify API keys: the hashing and the rules, over a table that
    a subclass keeps (SQLite here, PostgreSQL in ``app.keys.postgres``). Every method blocks:
    the app calls them on worker threads, except ``try_verify``, which never waits."""

    def __init__(self, secret: bytes | None) -> None:
        self._secret = secret
        """The server secret; None until ``open`` reads it with the store's files."""

    @abstractmethod
    def open(self) -> None:
        """Open what the keys are kept in; idempotent. A store is built cheaply and opened by
        its owner (the app, as it starts, off the event loop: ``Services.start``); one used
        without it opens at its first call."""

    def _digest(self, secret: str) -> str:
        if self._secret is None:
            self.open()
        assert self._secret is not None, "open() reads the server secret"
        mac = hmac.new(self._secret, secret.encode("utf-8"), hashlib.sha256).hexdigest()
        return _HMAC_TAG + mac

    # -- what a table provides -----------------------------------------------------------

    @abstractmethod
    def _insert(self, row: tuple[str, str, str, str, str, str | None]) -> int:
        """Insert (name, digest, hint, created_at, scopes, collections); the new id."""

    @abstractmethod
    def _rows(self) -> list[Sequence[Any]]:
        """Every key's columns (``KEY_COLUMNS``), by id."""

    @abstractmethod
    def _revoke(self, key_id: int, when: str) -> bool:
        """Mark key ``key_id`` revoked at ``when``; False when it was not active."""

    @abstractmethod
    def _find(self, digests: tuple[str, str]) -> Sequence[Any] | None:
        """The active key's columns and digest, whose digest is one of ``digests``."""

    def _find_at_once(self, digests: tuple[str, str]) -> tuple[bool, Sequence[Any] | None]:
        """``(True, _find(digests))`` when that needs no waiting, else ``(False, None)``. A
        store that can never answer at once (a remote database) keeps this default."""
        return False, None

    @abstractmethod
    def _set_digest(self, key_id: int, new: str, old: str) -> None:
        """Replace key ``key_id``'s digest ``old`` by ``new``."""

    @abstractmethod
    def close(self) -> None: ...

    # -- the rules -----------------------------------------------------------------------

    def create(
        self,
        name: str,
        *,
        scopes: Iterable[str] = ("ask",),
        collections: Iterable[str] | None = None,
    ) -> tuple[ApiKey, str]:
        """Make a new key; returns it with its secret, which is stored nowhere: shown once.
        ``collections`` None: every collection, present and future."""
        if not name.strip():
            raise ValueError("a key needs a non-empty name")
        chosen = check_scopes(scopes)
        readable = None if collections is None else frozenset(collections)
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        created = _now()
        hint = secret[:7] + "…"
        key_id = self._insert(
            (
                name,
                self._digest(secret),
                hint,
                created,
                json.dumps(sorted(chosen)),
                None if readable is None else json.dumps(sorted(readable)),
            )
        )
        return ApiKey(key_id, name, hint, created, None, chosen, readable), secret

    def list(self) -> list[ApiKey]:
        return [_key(row) for row in self._rows()]

    def revoke(self, key_id: int) -> bool:
        """Revoke key ``key_id``; False when there is no such active key."""
        return self._revoke(key_id, _now())

    def try_verify(self, secret: str) -> tuple[bool, ApiKey | None]:
        """``(True, verify(secret))`` when that answer comes without waiting on a lock, a busy
        database or the network; ``(False, None)`` when it cannot: then call ``verify`` on a
        worker thread. A legacy row's digest is left for ``verify`` to rewrite (a write)."""
        digest = self._digest(secret)
        answered, row = self._find_at_once((digest, _legacy_digest(secret)))
        if not answered:
            return False, None
        if row is None:
            return True, None
        if hmac.compare_digest(row[-1], digest):
            return True, _key(row[:-1])
        return False, None

    def verify(self, secret: str) -> ApiKey | None:
        """The active key whose secret this is, or None. A legacy row that matches has its
        digest upgraded to the HMAC."""
        digest, legacy = self._digest(secret), _legacy_digest(secret)
        row = self._find((digest, legacy))
        if row is None:
            return None
        stored = row[-1]
        if hmac.compare_digest(stored, digest):
            return _key(row[:-1])
        if not hmac.compare_digest(stored, legacy):
            return None
        self._set_digest(row[0], digest, legacy)
        return _key(row[:-1])


class KeyStore(BaseKeyStore):
    """The keys in one SQLite file (the default).

    A second connection answers ``try_verify``'s lookup on the event loop: an indexed lookup in
    a local file takes about 15 µs, where the hop to a worker thread and back took about 100 µs
    of CPU and woke a thread per request. It never waits: it gives up when its lock is taken or
    when a writer holds the file (busy timeout 0)."""

    def __init__(self, path: Path, *, secret: bytes | None = None) -> None:
        super().__init__(secret or None)
        self.path = path
        self._opening = threading.Lock()
        self._lock = threading.Lock()
        self._now_lock = threading.Lock()
        self._files: tuple[sqlite3.Connection, sqlite3.Connection] | None = None
        """The connection every call uses, and ``try_verify``'s own; None until opened."""

    def open(self) -> None:
        """Make the file's folder, read the server secret (made at the first run) unless one is
        configured, connect, and bring the table up to date; idempotent. Nothing of it happens
        at construction: an app built and never started has touched no file."""
        with self._opening:
            if self._files is not None:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self._secret is None:
                self._secret = load_or_create_secret(self.path.parent / SECRET_FILE)
            db = sqlite3.connect(self.path, check_same_thread=False)
            with db:
                db.execute(_SCHEMA)
                have = {row[1] for row in db.execute("PRAGMA table_info(api_keys)")}
                for column, kind in _ADDED_COLUMNS.items():
                    if column not in have:
                        db.execute(f"ALTER TABLE api_keys ADD COLUMN {column} {kind}")
            self._files = db, sqlite3.connect(self.path, timeout=0, check_same_thread=False)

    @property
    def _db(self) -> sqlite3.Connection:
        if self._files is None:
            self.open()
        assert self._files is not None
        return self._files[0]

    @classmethod
    def for_settings(cls, settings: Settings) -> KeyStore:
        """The key store of ``settings``' data dir (not opened), with its configured secret if
        any."""
        configured = settings.key_secret
        return cls(
            settings.keys_path,
            secret=configured.get_secret_value().encode() if configured else None,
        )

    def close(self) -> None:
        with self._opening:
            files, self._files = self._files, None
        for db in files or ():
            db.close()

    def _find_at_once(self, digests: tuple[str, str]) -> tuple[bool, Sequence[Any] | None]:
        files = self._files
        if files is None or not self._now_lock.acquire(blocking=False):
            return False, None  # not opened (opening waits on the disk), or its lock is taken
        try:
            row: Sequence[Any] | None = files[1].execute(_FIND_ACTIVE, digests).fetchone()
        except sqlite3.OperationalError:  # a writer holds the file ("database is locked")
            return False, None
        finally:
            self._now_lock.release()
        return True, row

    def _insert(self, row: tuple[str, str, str, str, str, str | None]) -> int:
        with self._lock, self._db:
            cur = self._db.execute(
                "INSERT INTO api_keys (name, digest, hint, created_at, scopes, collections) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def _rows(self) -> list[Sequence[Any]]:
        with self._lock:
            return self._db.execute(f"SELECT {KEY_COLUMNS} FROM api_keys ORDER BY id").fetchall()

    def _revoke(self, key_id: int, when: str) -> bool:
        with self._lock, self._db:
            cur = self._db.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (when, key_id),
            )
        return cur.rowcount == 1

    def _find(self, digests: tuple[str, str]) -> Sequence[Any] | None:
        with self._lock:
            row: Sequence[Any] | None = self._db.execute(
                _FIND_ACTIVE,
                digests,
            ).fetchone()
        return row

    def _set_digest(self, key_id: int, new: str, old: str) -> None:
        with self._lock, self._db:
            self._db.execute(
                "UPDATE api_keys SET digest = ? WHERE id = ? AND digest = ?", (new, key_id, old)
            )


def _key(row: Sequence[Any]) -> ApiKey:
    key_id, name, hint, created, revoked, scopes, collections = row
    return ApiKey(
        key_id,
        name,
        hint,
        created,
        revoked,
        LEGACY_SCOPES if scopes is None else frozenset(json.loads(scopes)),
        None if collections is None else frozenset(json.loads(collections)),
    )
