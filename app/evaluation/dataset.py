"""A labelled answer set: questions with the passages that answer them and their key facts,
questions the documents cannot answer, and questions whose passages carry a planted instruction.

A set is a JSON-lines file, one ``Case`` a line (``demo/answers/python-docs.jsonl`` is the one
that ships; its README says how it was made and under which licence). The documents a set is
asked over are its ``corpus`` folders (the demo corpus, and the planted documents beside the
set), uploaded into one collection by ``ragtime eval answers``. A file that cannot be read, or a
line that is not a case, is an error naming the file and line: nothing is asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo"

Kind = Literal["answerable", "unanswerable", "planted"]


class DatasetError(Exception):
    """A labelled set that cannot be read: the message names the file and the line."""


class SourceLabel(BaseModel):
    """A passage that answers the question: its file, and the heading that holds the answer
    (empty: anywhere in the file)."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1)
    section: str = ""


class Case(BaseModel):
    """One labelled question."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    kind: Kind
    question: str = Field(min_length=1)
    sources: list[SourceLabel] = Field(default_factory=list)
    facts: list[list[str]] = Field(
        default_factory=list,
        description="What a right answer holds: every fact, each by any of its phrasings.",
    )
    reference: str = ""
    planted: str = Field("", description="The planted document's file name (planted only).")
    canary: str = Field("", description="What the planted instruction asks the model to write.")

    @model_validator(mode="after")
    def _labels_fit_the_kind(self) -> Case:
        if self.kind == "unanswerable" and (self.sources or self.facts):
            raise ValueError("an unanswerable question has no sources and no facts")
        if self.kind != "unanswerable" and not (self.sources and self.facts):
            raise ValueError(
                f"a{'n' if self.kind[0] == 'a' else ''} {self.kind} question needs "
                "sources and facts"
            )
        if any(
            not alternatives or not all(a.strip() for a in alternatives)
            for alternatives in self.facts
        ):
            raise ValueError("each fact is a non-empty list of non-empty phrasings")
        if (self.kind == "planted") != bool(self.planted and self.canary):
            raise ValueError("planted and canary are given for planted questions, and only them")
        return self


@dataclass(frozen=True)
class Dataset:
    """A labelled set: its name, its cases, and the folders of documents it is asked over."""

    name: str
    path: Path
    cases: list[Case]
    corpus: tuple[Path, ...]


#: The sets that ship, by the name ``--dataset`` takes: (cases, document folders).
SHIPPED = {
    "python-docs": (
        DEMO / "answers" / "python-docs.jsonl",
        (DEMO / "corpus", DEMO / "answers" / "planted"),
    ),
}


def load_dataset(name_or_path: str) -> Dataset:
    """A shipped set by name, or a JSON-lines file by path (its documents: the folder
    ``documents`` beside it, if there is one)."""
    corpus: tuple[Path, ...]
    if name_or_path in SHIPPED:
        path, corpus = SHIPPED[name_or_path]
        name = name_or_path
    else:
        path = Path(name_or_path)
        beside = path.parent / "documents"
        corpus = (beside,) if beside.is_dir() else ()
        name = path.stem
    return Dataset(name, path, read_cases(path), corpus)


def read_cases(path: Path) -> list[Case]:
    """The cases of a JSON-lines file, blank lines skipped; ids must be unique."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"{path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    cases: list[Case] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            case = Case.model_validate(json.loads(line))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise DatasetError(
                f"{path}:{number}: {where + ': ' if where else ''}{first['msg']}"
            ) from exc
        if case.id in seen:
            raise DatasetError(f"{path}:{number}: the id {case.id!r} is used twice")
        seen.add(case.id)
        cases.append(case)
    if not cases:
        raise DatasetError(f"{path}: holds no questions")
    return cases


def corpus_files(dataset: Dataset) -> list[Path]:
    """The documents of the set's folders, in name order (hidden files left out)."""
    files: list[Path] = []
    for folder in dataset.corpus:
        if not folder.is_dir():
            raise DatasetError(f"{folder}: the set's documents are not there")
        files.extend(
            p
            for p in sorted(folder.rglob("*"))
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
        )
    return files
