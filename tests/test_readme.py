"""The README agrees with the code: its configuration table lists every setting and no other.

As ``test_compose.py`` does for docker-compose, by parsing: each row's first cell names one or
more keys in backticks; ``RAGTIME_BUDGET_MS_DEFAULT`` / ``_MIN`` / ``_MAX`` is shorthand for
``RAGTIME_BUDGET_MS_MIN`` and ``RAGTIME_BUDGET_MS_MAX`` (a short key replaces as many trailing
words of the row's first key as it has). Keys outside ``RAGTIME_*`` (``PORT``, ``OTEL_*``) are
not ours to check.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.config import Settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PREFIX = "RAGTIME_"


def section(text: str, title: str) -> str:
    """The body of the ``## title`` section."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"README has no '## {title}' section"
    return match.group(1)


def row_keys(cell: str) -> list[str]:
    """The keys a first cell names, shorthand expanded."""
    keys: list[str] = []
    for name in re.findall(r"`([A-Z_][A-Z0-9_]*)`", cell):
        if name.startswith("_"):
            assert keys, f"{cell!r}: a short key needs a full one before it"
            words = keys[0].split("_")
            short = name[1:].split("_")
            keys.append("_".join(words[: len(words) - len(short)] + short))
        else:
            keys.append(name)
    return keys


def table_keys(text: str) -> list[str]:
    rows = [line for line in section(text, "Configuration").splitlines() if line.startswith("|")]
    keys = [key for row in rows[2:] for key in row_keys(row.split("|")[1])]
    return [key for key in keys if key.startswith(PREFIX)]


def test_the_shorthand_expands() -> None:
    assert row_keys("`RAGTIME_BUDGET_MS_DEFAULT` / `_MIN` / `_MAX`") == [
        "RAGTIME_BUDGET_MS_DEFAULT",
        "RAGTIME_BUDGET_MS_MIN",
        "RAGTIME_BUDGET_MS_MAX",
    ]
    assert row_keys("`RAGTIME_ALERT_INTERVAL_S` / `_WINDOW_S`") == [
        "RAGTIME_ALERT_INTERVAL_S",
        "RAGTIME_ALERT_WINDOW_S",
    ]
    assert row_keys("`RAGTIME_HOST` / `RAGTIME_PORT` (or `PORT`)") == [
        "RAGTIME_HOST",
        "RAGTIME_PORT",
        "PORT",
    ]


@pytest.fixture(scope="module")
def documented() -> list[str]:
    return table_keys(README.read_text())


def test_the_table_lists_every_setting(documented: list[str]) -> None:
    fields = {PREFIX + name.upper() for name in Settings.model_fields}
    assert sorted(fields - set(documented)) == []


def test_the_table_lists_nothing_but_settings(documented: list[str]) -> None:
    fields = {PREFIX + name.upper() for name in Settings.model_fields}
    assert sorted(set(documented) - fields) == []


def test_each_key_has_one_row(documented: list[str]) -> None:
    assert sorted({k for k in documented if documented.count(k) > 1}) == []
