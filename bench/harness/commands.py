"""What the suites' commands share: list arguments, the question file, secrets kept out of
results, and running a bench to print its report and write its JSON."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bench.harness.paths import DEMO_QUESTIONS

__all__ = [
    "DEMO_QUESTIONS",
    "SECRET_KEYS",
    "argv_of",
    "positive_floats",
    "positive_ints",
    "read_questions",
    "run_and_report",
]

#: Variables of a config file that a result never shows.
SECRET_KEYS = ("RAGTIME_API_KEY",)

T = TypeVar("T")


def positive_ints(text: str) -> list[int]:
    """``1,2,8`` as [1, 2, 8]; every one at least 1."""
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def positive_floats(text: str) -> list[float]:
    """``0.5,1,1.5`` as [0.5, 1.0, 1.5]; every one above 0."""
    values = [float(v) for v in text.split(",") if v.strip()]
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected positive rates, got {text!r}")
    return values


def read_questions(path: Path) -> list[str]:
    """Non-empty lines that are not ``#`` comments."""
    lines = [line.strip() for line in path.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def argv_of(args: argparse.Namespace) -> list[str]:
    """The arguments the command was given (``args.argv`` where a caller set it)."""
    return getattr(args, "argv", None) or sys.argv[1:]


def run_and_report(
    run: Callable[[], T],
    report: Callable[[T], str],
    write: Callable[[T, Path], None],
    json_path: Path | None,
) -> int:
    """Run a bench, print its report and write its JSON; a server or input failure is exit 1."""
    from bench.harness.serve import ServerFailed

    try:
        result = run()
    except (ServerFailed, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(report(result))
    if json_path:
        write(result, json_path)
        print(f"\nwrote {json_path}", file=sys.stderr)
    return 0
