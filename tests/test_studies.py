"""The studies by hand (issue 61): BENCHMARKS.md holds what ``make bench`` writes, then an index
of ``docs/studies/``, one page per topic. Every page is in both indexes, every link between the
pages resolves, and no study is left below BENCHMARKS.md's kept mark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.report.benchmarks_md import KEPT_MARK

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "docs" / "studies"
PAGES = sorted(p for p in STUDIES.glob("*.md") if p.name != "index.md")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def kept_tail() -> str:
    text = (ROOT / "BENCHMARKS.md").read_text()
    return text[text.index(KEPT_MARK) :]


def test_there_are_study_pages() -> None:
    assert len(PAGES) >= 5


def test_benchmarks_md_ends_with_the_index_and_nothing_else() -> None:
    headings = [line for line in kept_tail().splitlines() if line.startswith("#")]
    assert headings == ["## Studies by hand"]


@pytest.mark.parametrize("index", ["BENCHMARKS.md", "docs/studies/index.md"])
def test_each_index_links_every_page_and_only_pages_that_exist(index: str) -> None:
    path = ROOT / index
    text = kept_tail() if index == "BENCHMARKS.md" else path.read_text()
    linked = {(path.parent / target).resolve() for target in LINK.findall(text)}
    assert linked == {page.resolve() for page in PAGES}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_page_opens_with_what_it_decided_and_dates_each_study(page: Path) -> None:
    text = page.read_text()
    assert text.startswith("# ")
    assert "What these studies decided" in text.split("\n## ", 1)[0]
    studies = [line for line in text.splitlines() if line.startswith("## ")]
    assert studies
    for heading in studies:
        assert re.search(r"20\d\d-\d\d-\d\d", heading), heading


@pytest.mark.parametrize("page", [*PAGES, STUDIES / "index.md"], ids=lambda p: p.name)
def test_links_stay_inside_docs_and_resolve(page: Path) -> None:
    """MkDocs' strict build fails on a link out of ``docs/``: these pages name BENCHMARKS.md in
    words, not by a link."""
    for target in LINK.findall(page.read_text()):
        if "://" in target:
            continue
        resolved = (page.parent / target).resolve()
        assert resolved.is_relative_to(ROOT / "docs"), target
        assert resolved.is_file(), target
