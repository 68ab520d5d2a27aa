"""Keeps secrets out of the access log: credentials sent in a query string are redacted.

ragtime reads its API key from the ``Authorization`` header only, but a client may still put a
key in the URL (``?api_key=...``), and uvicorn's access log writes the whole path with its query
string. ``RedactQuerySecrets`` is a logging filter on ``uvicorn.access`` that masks the values of
such parameters before any handler sees the record.
"""

from __future__ import annotations

import logging
import re

#: Query parameters whose values are credentials, whatever their case.
SECRET_PARAMS = ("key", "api_key", "apikey", "token", "access_token", "auth", "authorization")
_SECRET_VALUE = re.compile(r"(?i)([?&](?:" + "|".join(SECRET_PARAMS) + r")=)[^&#\s\"]*")
REDACTED = "[redacted]"


def redact(text: str) -> str:
    """``text`` with the values of credential query parameters replaced."""
    return _SECRET_VALUE.sub(lambda m: m.group(1) + REDACTED, text)


class RedactQuerySecrets(logging.Filter):
    """Masks credential query parameters in a record's arguments (uvicorn passes the path as
    one of them) and message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


def install() -> None:
    """Add the filter to uvicorn's access logger, once per process."""
    logger = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQuerySecrets) for f in logger.filters):
        logger.addFilter(RedactQuerySecrets())
