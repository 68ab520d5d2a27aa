"""The manual's configuration page (``docs/configuration.md``) agrees with the code: its table
lists every setting and no other.

As ``test_compose.py`` does for docker-compose, by parsing: each row's first cell names one or
more keys in backticks; ``RAGTIME_BUDGET_MS_DEFAULT`` / ``_MIN`` / ``_MAX`` is shorthand for
``RAGTIME_BUDGET_MS_MIN`` and ``RAGTIME_BUDGET_MS_MAX`` (a short key replaces as many trailing
words of the row's first key as it has). Keys outside ``RAGTIME_*`` (``PORT``, ``OTEL_*``) are
not ours to check.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "configuration.md"
PREFIX = "RAGTIME_"


def section(text: str, title: str) -> str:
    """The body of the ``## title`` section."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"{PAGE.name} has no '## {title}' section"
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
    rows = [line for line in section(text, "Settings").splitlines() if line.startswith("|")]
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
    return table_keys(PAGE.read_text())


def test_the_table_lists_every_setting(documented: list[str]) -> None:
    fields = {PREFIX + name.upper() for name in Settings.model_fields}
    assert sorted(fields - set(documented)) == []


def test_the_table_lists_nothing_but_settings(documented: list[str]) -> None:
    fields = {PREFIX + name.upper() for name in Settings.model_fields}
    assert sorted(set(documented) - fields) == []


def test_each_key_has_one_row(documented: list[str]) -> None:
    assert sorted({k for k in documented if documented.count(k) > 1}) == []


def literal(value: object) -> set[str]:
    """How the table may write a default: ``true`` for True, ``2`` or ``2.0`` for 2.0, ..."""
    if isinstance(value, bool):
        return {str(value).lower()}
    if isinstance(value, float):
        return {repr(value), f"{value:g}"}
    if isinstance(value, list | dict):
        return {json.dumps(value)}
    return {str(value)}


def table_defaults(text: str) -> dict[str, str]:
    """Each key's default cell (a cell ``a / b`` gives one part per key of its row)."""
    rows = [line for line in section(text, "Settings").splitlines() if line.startswith("|")]
    found: dict[str, str] = {}
    for row in rows[2:]:
        cells = [c.strip() for c in row.split("|")[1:-1]]
        keys = [key for key in row_keys(cells[0]) if key.startswith(PREFIX)]
        parts = [p.strip() for p in cells[1].split(" / ")]
        for i, key in enumerate(keys):
            found[key] = parts[i] if len(parts) == len(keys) else parts[0]
    return found


def test_the_table_gives_each_default_as_the_code_has_it() -> None:
    """Where a setting has a default value (not None: those the table describes in words), the
    table's cell starts with it, in backticks. Dicts other than ``{}`` are described."""
    wrong = []
    for key, cell in table_defaults(PAGE.read_text()).items():
        field = Settings.model_fields[key[len(PREFIX) :].lower()]
        default = field.get_default(call_default_factory=True)
        if default is None or (isinstance(default, dict) and default):
            continue
        written = re.match(r"`([^`]*)`", cell)
        if written is None or written.group(1) not in literal(default):
            wrong.append(f"{key}: the page {cell!r}, code {default!r}")
    assert wrong == []
