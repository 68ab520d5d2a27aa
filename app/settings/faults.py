"""How a configuration that does not validate is told: one line per bad setting, naming its
``RAGTIME_*`` variable, the value given and what is expected (``setting_faults``).

pydantic's own text gives four lines a fault (a title, the field, the input, a link) and names the
field, not the variable an operator sets. A secret's value (``SecretStr`` fields, a URL holding
a password) is never repeated.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import SecretStr, ValidationError
from pydantic_settings import SettingsError

from app.settings.settings import Settings

ENV_PREFIX = "RAGTIME_"


def env_name(field: str) -> str:
    """``top_k`` -> ``RAGTIME_TOP_K``."""
    return ENV_PREFIX + field.upper()


def setting_faults(exc: ValidationError | SettingsError) -> list[str]:
    """One line per fault of ``exc``, raised building ``Settings``:
    ``RAGTIME_TOP_K='four': should be a valid integer, unable to parse string as an integer``."""
    fields: dict[str, Any] = dict(Settings.model_fields)
    if isinstance(exc, SettingsError):  # a JSON setting that is not JSON
        return [_unparsed(exc, fields)]
    return [_fault(error, fields) for error in exc.errors(include_url=False)]


def _fault(error: Any, fields: dict[str, Any]) -> str:
    loc = [str(part) for part in error.get("loc", ())]
    message = _expected(str(error.get("msg", "")), fields)
    if not loc or loc[0] not in fields:  # a check across settings: its message names them
        return f"invalid settings: {message}"
    name, where = loc[0], "".join(f"[{part}]" for part in loc[1:])
    return f"{env_name(name)}{where}={_shown(name, error.get('input'), fields)}: {message}"


def _expected(message: str, fields: dict[str, Any]) -> str:
    """pydantic's message as what is expected, the fields it names as their variables."""
    message = re.sub(r"^(Value error|Assertion failed), ", "", message)
    message = re.sub(r"^Input should", "should", message)
    names = sorted((f for f in fields if "_" in f), key=len, reverse=True)
    if not names:
        return message
    pattern = r"\b(" + "|".join(map(re.escape, names)) + r")\b"
    return re.sub(pattern, lambda m: env_name(m.group(1)), message)


def _shown(name: str, value: Any, fields: dict[str, Any]) -> str:
    """The value given, as typed, unless it may hold a secret."""
    annotation = str(getattr(fields.get(name), "annotation", ""))
    if isinstance(value, SecretStr) or "SecretStr" in annotation:
        return "(hidden)"
    if isinstance(value, str) and "@" in value and "://" in value:  # a URL's password
        return "(hidden)"
    return repr(value)


def _unparsed(exc: SettingsError, fields: dict[str, Any]) -> str:
    """``error parsing value for field "model_pools" from source ...`` as one line."""
    found = re.search(r'field "([^"]+)"', str(exc))
    if found is None:
        return f"invalid settings: {exc}"
    name = found.group(1)
    given = os.environ.get(env_name(name))
    value = f"={_shown(name, given, fields)}" if given is not None else ""
    cause = exc.__cause__
    why = f" ({cause})" if cause is not None else ""
    return f"{env_name(name)}{value}: should be JSON{why}"
