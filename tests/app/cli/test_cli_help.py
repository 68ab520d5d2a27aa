"""Every option of every ``ragtime`` subcommand has help, and its help shows its default (issue 43
§4: most options showed neither). The walk covers the whole parser, ``ragtime bench``'s options
(the ``bench`` package registers them) included."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from app.cli import commands as cli

#: Subcommands the walk leaves out (none).
ELSEWHERE: set[tuple[str, ...]] = set()


def parsers(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("ragtime",)
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """``parser`` and each subcommand's parser under it, by their command path."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                if (*path, name) not in ELSEWHERE:
                    yield from parsers(child, (*path, name))


def value_default(action: argparse.Action) -> bool:
    """Whether ``action`` has a default a user should read in its help: a value, not None, not
    an empty list, not the False of a flag."""
    default = action.default
    if default is None or default is argparse.SUPPRESS:
        return False
    if action.nargs == 0 and isinstance(default, bool):
        return False
    return not (isinstance(default, list | tuple) and not default)


def faults(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> list[str]:
    """What is wrong with the help of ``parser``'s own options and subcommands."""
    found = []
    formatter = parser._get_formatter()
    for action in parser._actions:
        where = " ".join(path) + " " + ("/".join(action.option_strings) or action.dest)
        if isinstance(action, argparse._SubParsersAction):
            helped = {choice.dest for choice in action._choices_actions if choice.help}
            found += [f"{' '.join(path)} {n}: no help" for n in action.choices if n not in helped]
            continue
        if action.help == argparse.SUPPRESS:
            continue
        if not action.help:
            found.append(f"{where}: no help")
            continue
        shown = formatter._expand_help(action)
        if value_default(action) and str(action.default) not in shown:
            found.append(f"{where}: its default {action.default!r} is not in {shown!r}")
    return found


def test_every_option_has_help_that_shows_its_default() -> None:
    walked = list(parsers(cli.build_parser()))
    assert {" ".join(p) for p, _ in walked} >= {
        "ragtime serve",
        "ragtime ingest",
        "ragtime keys create",
        "ragtime ask",
        "ragtime eval retrieval",
        "ragtime reranker train",
    }
    assert [fault for path, parser in walked for fault in faults(parser, path)] == []


def test_the_walk_finds_an_option_without_help_or_default() -> None:
    parser = cli.build_parser()
    parser.add_argument("--bare")
    parser.add_argument("--hidden-default", type=int, default=7, help="a number %(prog)s takes")
    parser.add_argument("--flag", action="store_true", help="a flag: no default to show")
    assert faults(parser, ("ragtime",)) == ["ragtime --bare: no help"]
    parser.formatter_class = argparse.HelpFormatter  # argparse's own: no defaults
    assert faults(parser, ("ragtime",))[1].startswith("ragtime --hidden-default: its default 7")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["serve", "--help"], "(default: info)"),
        (["reranker", "train", "--help"], "(default: 400)"),
        (["eval", "retrieval", "--help"], "(default: 100)"),
        (["--help"], "exit status: 0 done; 1 the command could not do its work"),
    ],
)
def test_help_shows_defaults_and_exit_statuses(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 0
    assert says in " ".join(capsys.readouterr().out.split())
