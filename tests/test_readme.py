"""The README is a door, not a manual (issue 61): at most 250 lines, and every link it gives
into the repository (the manual's pages, BENCHMARKS.md, CONTRIBUTING.md, its picture) leads to a
file that is there. The manual's own links are checked by ``mkdocs build --strict``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MOST_LINES = 250


def test_the_readme_is_at_most_250_lines() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= MOST_LINES, f"README.md has {lines} lines: move the detail into docs/"


def relative_links(text: str) -> list[str]:
    """The targets of the Markdown links and images that name a path, anchors dropped."""
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    return [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:|#", t)]


def test_the_link_reader_finds_paths_only() -> None:
    text = "[a](docs/a.md#x) ![b](docs/b.png) <http://x/> [c](https://x/y) [d](#here)"
    assert relative_links(text) == ["docs/a.md", "docs/b.png"]


def test_every_link_into_the_repository_leads_to_a_file() -> None:
    links = relative_links(README.read_text())
    assert any(link.startswith("docs/") for link in links), "the README links into no page"
    missing = sorted({link for link in links if not (ROOT / link).is_file()})
    assert missing == []
