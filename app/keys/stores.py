"""Which key store a deployment uses: PostgreSQL when ``RAGTIME_DATABASE_URL`` is set (keys
shared by every replica, ``app.keys.postgres``), else SQLite in the data dir (``app.keys.auth``)."""

from __future__ import annotations

from app.keys.auth import BaseKeyStore, KeyStore
from app.settings import Settings


def open_key_store(settings: Settings) -> BaseKeyStore:
    """The configured key store, not yet opened."""
    if settings.database_url is None:
        return KeyStore.for_settings(settings)
    from app.keys.postgres import PostgresKeyStore  # psycopg loads only where it is used

    assert settings.key_secret is not None  # the settings require it with a database
    return PostgresKeyStore(
        settings.database_url.get_secret_value(),
        secret=settings.key_secret.get_secret_value().encode(),
    )
