"""HTML to sectioned text with BeautifulSoup on Python's own ``html.parser``.

Headings (``h1``-``h6``) open sections, block elements (paragraphs, list items, table rows,
...) become blocks, ``pre`` stays a code block. Scripts, styles, templates and the like are
dropped, and nothing is fetched or run: ``html.parser`` resolves no external entity and loads
no linked resource. Parsing is linear in the markup, which the upload size bounds: the blocks
are counted against ``max_paragraphs`` once read.
"""

from __future__ import annotations

from bs4 import BeautifulSoup, NavigableString, Tag

from retrieval.formats.document import Block, Document, SectionPath, drop_title
from retrieval.formats.limits import DEFAULT_LIMITS, ParseLimits

_DROPPED = frozenset(
    {
        *("script", "style", "noscript", "template", "head", "title", "svg", "canvas"),
        "iframe",
        *("object", "embed", "form", "button", "select", "nav"),
    }
)
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = frozenset(
    {
        *("p", "div", "section", "article", "main", "aside", "header", "footer", "li", "ul"),
        *("ol", "dl", "dt", "dd", "blockquote", "tr", "table", "caption", "figure"),
        *("figcaption", "address", "details", "summary", "hr", "body", "html"),
    }
)


class _Walker:
    def __init__(self) -> None:
        self.path = SectionPath()
        self.blocks: list[Block] = []
        self._words: list[str] = []

    def flush(self) -> None:
        text = " ".join(" ".join(self._words).split())
        if text:
            self.blocks.append(Block(text, self.path.path))
        self._words = []

    def walk(self, node: Tag) -> None:
        for child in node.children:
            if type(child) is NavigableString:  # not a comment, doctype or CDATA
                self._words.append(str(child))
            elif isinstance(child, Tag):
                self._tag(child)

    def _tag(self, tag: Tag) -> None:
        name = tag.name.lower()
        if name in _DROPPED:
            return
        if name in _HEADINGS:
            self.flush()
            heading = tag.get_text(" ", strip=True)
            if heading:
                self.path.enter(_HEADINGS[name], " ".join(heading.split()))
        elif name == "pre":
            self.flush()
            code = tag.get_text().strip("\n")
            if code.strip():
                self.blocks.append(Block(code, self.path.path, code=True))
        elif name == "br":
            self._words.append("\n")
        elif name in ("td", "th"):
            self.walk(tag)
            self._words.append(" | ")
        elif name in _BLOCKS:
            self.flush()
            self.walk(tag)
            self.flush()
        else:
            self.walk(tag)


def html_to_document(markup: str | bytes, kind: str = "html") -> Document:
    """The text a reader sees in ``markup``, under its headings; ``<title>`` is the title."""
    soup = BeautifulSoup(markup, "html.parser")
    title_tag = soup.find("title")
    title = " ".join(title_tag.get_text(" ").split()) if title_tag else ""
    walker = _Walker()
    walker.walk(soup)
    walker.flush()
    blocks = [
        Block(block.text.strip(" |"), block.path, code=block.code) if not block.code else block
        for block in walker.blocks
    ]
    return drop_title(Document(kind, title=title, blocks=[b for b in blocks if b.text]))


def parse_html(data: bytes, *, limits: ParseLimits = DEFAULT_LIMITS) -> Document:
    document = html_to_document(data)
    limits.check("max_paragraphs", len(document.blocks))
    return document
