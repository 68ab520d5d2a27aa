"""A labelled answer set: questions with the passages that answer them and their key facts,
questions the documents cannot answer, and questions whose passages carry a planted instruction.

A set is a JSON-lines file, one ``Case`` a line (``demo/answers/python-docs.jsonl`` and
``debian-faq.jsonl`` ship; their README says how they were made and under which licence). The
documents a set is asked over are its ``corpus`` folders, uploaded into one collection by
``ragtime eval answers``: for ``python-docs`` the demo corpus and the planted documents beside
the set; for ``debian-faq`` the Debian FAQ's chapters, which the repository does not hold and
``load_dataset`` writes from the package ``make eval-data`` fetched (``debian_faq``). A file that
cannot be read, a line that is not a case, or a set whose data is not there, is an error naming
the file and line or the make target: nothing is asked.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from app.evaluation import debian_faq
from app.settings import get_settings
from retrieval.eval.faq_corpus import EvalDataMissing

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


@dataclass(frozen=True)
class Shipped:
    """A set that ships: its cases, and its documents: folders in the repository, or the one
    folder ``build`` writes under the data dir (``data_dir`` -> the folder) from data that
    ``make eval-data`` fetched (``EvalDataMissing`` when it is not there)."""

    cases: Path
    corpus: tuple[Path, ...] = ()
    build: Callable[[Path], Path] | None = None


#: The sets that ship, by the name ``--dataset`` takes.
SHIPPED = {
    "python-docs": Shipped(
        DEMO / "answers" / "python-docs.jsonl",
        (DEMO / "corpus", DEMO / "answers" / "planted"),
    ),
    "debian-faq": Shipped(DEMO / "answers" / "debian-faq.jsonl", build=debian_faq.corpus_under),
}


def load_dataset(name_or_path: str, data_dir: Path | None = None) -> Dataset:
    """A shipped set by name, or a JSON-lines file by path (its documents: the folder
    ``documents`` beside it, if there is one). A shipped set with a builder has its documents
    written under ``data_dir`` (default: the settings' ``data_dir``) once its cases are read."""
    shipped = SHIPPED.get(name_or_path)
    if shipped is None:
        path = Path(name_or_path)
        beside = path.parent / "documents"
        return Dataset(path.stem, path, read_cases(path), (beside,) if beside.is_dir() else ())
    cases = read_cases(shipped.cases)
    corpus = shipped.corpus
    if shipped.build is not None:
        corpus = (_built(name_or_path, shipped.build, data_dir),)
    return Dataset(name_or_path, shipped.cases, cases, corpus)


def _built(name: str, build: Callable[[Path], Path], data_dir: Path | None) -> Path:
    """The folder ``build`` wrote under ``data_dir``; ``DatasetError`` when its data is
    missing."""
    try:
        return build(get_settings().data_dir if data_dir is None else data_dir)
    except EvalDataMissing as exc:
        raise DatasetError(f"{name}: {exc}") from exc


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
