"""How every ``ragtime`` command's ``--help`` reads: each option with its help and its default.

``RagtimeParser`` is the parser of ``ragtime`` and, through argparse's ``parser_class``, of every
subcommand's (those ``ragtime bench`` registers included). Its formatter, ``DefaultsShown``,
ends the help of an option whose default is a value with ``(default: X)``: not for a default of
None (the help says where the value then comes from, a setting as a rule), an empty list, or a
flag's False. ``EXIT_STATUSES`` closes ``ragtime --help``; docs/cli.md says the same.
"""

from __future__ import annotations

import argparse
from typing import Any

#: What ``ragtime``'s exit status means (docs/cli.md).
EXIT_STATUSES = (
    "exit status: 0 done; 1 the command could not do its work (one line on stderr says why: a "
    "path that does not exist, nothing to ingest, a RAGTIME_ setting that does not validate, "
    "no server to ask...); 2 the command line is wrong (an unknown option, a missing or "
    "malformed argument, a value out of range); 130 interrupted (Ctrl-C): nothing half-written "
    "is kept."
)


def shows_default(action: argparse.Action) -> bool:
    """Whether ``action``'s default is a value that its help must show."""
    default = action.default
    if default is None or default is argparse.SUPPRESS or action.nargs == 0:
        return False  # None: the help says where the value comes from; nargs 0: a flag
    return not (isinstance(default, list | tuple | set | dict) and not default)


class DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """argparse's formatter that shows defaults, for the defaults ``shows_default`` names, and
    not twice: help that already says its default (``%(default)s``, or in words) is kept."""

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = action.help or ""
        if not shows_default(action) or "default" in help_text.lower():
            return help_text
        return help_text + " (default: %(default)s)"


class RagtimeParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose help shows defaults (``DefaultsShown``), as do its
    subcommands' (argparse makes them of the parser's own class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsShown)
        super().__init__(*args, **kwargs)
