"""How the ``ragtime`` command reports what it cannot do: one line on stderr, naming the path
and the cause, no traceback, and exit 1 (``one_line``; a configuration with several bad
``RAGTIME_*`` settings gets a line for each). What is not foreseen here keeps its traceback: it
is a bug to report.

The commands guard their file-system and database work with ``at`` (and check a directory
before slow work with ``writable_dir``), so that a failure names what was being done and where.
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic import ValidationError
from pydantic_settings import SettingsError

from app.settings import setting_faults


class CliError(Exception):
    """A failure the CLI reports as one line naming the path and the cause, no traceback."""


#: The base of ragtime's own errors in each package, by the module that defines it. Their
#: messages are written for the user (the ONNX export's names the setting to change); looked up
#: only where imported: code that raised one imported its module, and the CLI stays light.
OWN_ERRORS = {
    "retrieval.errors": "RetrievalError",
    "inference.errors": "InferenceError",
    "tracing.budget.errors": "BudgetError",
}


def cause(exc: BaseException) -> str:
    """An error's cause in words: an OS error's own text, else its message, else its name."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


@contextmanager
def at(path: Path, doing: str) -> Iterator[None]:
    """Turn a file-system or SQLite failure in the block into ``cannot <doing> <path>: cause``."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        raise CliError(f"cannot {doing} {path}: {cause(exc)}") from exc


def writable_dir(path: Path, what: str) -> None:
    """Make ``path`` if missing and write a file in it, before any slow work (loading a model):
    a read-only, full or misplaced data dir is named at once."""
    if path.exists() and not path.is_dir():
        raise CliError(f"cannot write {what} in {path}: it is not a directory")
    with at(path, f"write {what} in"):
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass


def one_line(exc: Exception) -> str | None:
    """The line a command's failure is reported as (one a bad setting), or ``None`` for what no
    one foresaw."""
    if isinstance(exc, CliError):
        return f"error: {exc}"
    if isinstance(exc, SettingsError) or (
        isinstance(exc, ValidationError) and exc.title == "Settings"
    ):  # RAGTIME_ settings that do not validate
        return "\n".join(f"error: {line}" for line in setting_faults(exc))
    if isinstance(exc, ValidationError):
        return f"error: invalid values: {exc.error_count()} fault(s): " + "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
    if isinstance(exc, OSError):  # what no command foresaw: still one line, with the path
        where = f" {exc.filename}" if exc.filename else ""
        return f"error: cannot use{where}: {cause(exc)}"
    if isinstance(exc, sqlite3.Error):  # likewise, from a database no command named
        return f"error: database: {cause(exc)}"
    if _own_error(exc):
        return f"error: {exc}"  # its message says what to do
    return None


def _own_error(exc: Exception) -> bool:
    """Whether ``exc`` is one of ragtime's own errors (``OWN_ERRORS``)."""
    return any(
        isinstance(exc, getattr(sys.modules[module], base))
        for module, base in OWN_ERRORS.items()
        if module in sys.modules
    )
