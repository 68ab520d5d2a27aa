"""Markup to plain text for retrieval: headings, directive noise and inline roles.

reStructuredText is read the way a reader sees it, not parsed fully: section titles (a line
underlined, and optionally overlined, by a row of one punctuation character at least as long
as the text), explicit markup (``.. _label:`` targets, comments, ``.. index::``-like directives
with their bodies are dropped; admonitions keep their text; ``code-block`` becomes a literal
block), and inline roles (``:func:`len``` -> ``len``). Markdown ``#`` headings and fenced code
are understood too; plain text passes through unchanged.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field

_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_EXPLICIT = re.compile(r"^(?P<indent>[ ]*)\.\.(?:[ ]+(?P<rest>.*))?$")
_DIRECTIVE = re.compile(r"^(?P<name>[\w:.+-]+?)::(?:[ ]+(?P<arg>.*))?$")
_OPTION = re.compile(r"^[ ]+:[\w-]+:(?:[ ].*)?$")
_DOCINFO = re.compile(r"^:[\w-]+:(?:[ ].*)?$")
_MD_HEADING = re.compile(r"^#{1,6}[ \t]+(?P<text>.+?)(?:[ \t]+#+)?[ \t]*$")
_TABLE_BORDER = re.compile(r"^[ ]*(?:\+(?:[-=:]+\+)+|=+(?:[ ]+=+)+)[ ]*$")
_FENCE = re.compile(r"^[ ]*(?P<fence>```|~~~)")
_LIST_MARKER = re.compile(r"^[ ]*(?:[-*+•]|\d+[.)]|#\.|\(?[a-zA-Z0-9]\))[ ]+")

# Directives whose whole block carries nothing worth retrieving.
_DROPPED = frozenset(
    [
        *("index", "toctree", "contents", "highlight", "meta", "raw", "include", "literalinclude"),
        *("sectionauthor", "moduleauthor", "codeauthor", "tabularcolumns", "testsetup"),
        *("testcleanup", "image", "figure", "currentmodule", "module", "default-role", "role"),
        "productionlist",
    ]
)
# Directives whose body is code: kept as a literal block.
_CODE = frozenset(["code-block", "code", "sourcecode", "doctest", "testcode", "testoutput"])
# Directives whose argument is a condition, not text.
_SILENT_ARGUMENT = frozenset({"only", "ifconfig"})
# What a reader sees in place of an argument-less admonition, or before a version note.
_LABELS = {
    "seealso": "See also",
    "versionadded": "New in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
}

_ROLE = re.compile(r"(?<![\w`])(?P<name>(?::[\w.+-]+)+):`(?P<body>[^`]+)`")
_LINK = re.compile(r"`(?P<text>[^`<]+?)\s*<[^`>]*>`__?")
_NAMED_LINK = re.compile(r"`(?P<text>[^`]+)`__?(?!\w)")
_LITERAL = re.compile(r"``(?P<text>[^`]+?)``")
_DEFAULT_ROLE = re.compile(r"(?<![\w`])`(?P<text>[^`\n]+)`(?![\w`])")
_TITLED_TARGET = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]*)>$", re.DOTALL)


@dataclass
class Section:
    """The text under one heading (``heading`` is "" before the first one)."""

    heading: str
    lines: list[str] = field(default_factory=list)
    #: How the heading was marked: ("over", c) / ("under", c) for reST adornments, ("#", n)
    #: for a Markdown ATX heading; "" for the text before the first heading.
    style: tuple[str, str | int] | tuple[()] = ()


@dataclass(frozen=True)
class Block:
    """A paragraph, or a literal (code) block, as plain text."""

    text: str
    code: bool


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _content_indent(line: str) -> int:
    """Where the text of ``line`` starts, after any list bullet or enumerator."""
    marker = _LIST_MARKER.match(line)
    return marker.end() if marker else _indent(line)


def _skip_body(lines: list[str], start: int, indent: int) -> int:
    """Index of the first line after the indented body that begins at ``start``."""
    end = i = start
    while i < len(lines):
        if not lines[i].strip():
            i += 1
        elif _indent(lines[i]) > indent:
            i += 1
            end = i
        else:
            break
    return end


def strip_noise(lines: list[str]) -> list[str]:
    """Drop targets, comments, noise directives and table borders; unwrap other directives."""
    out: list[str] = []
    i = 0
    while i < len(lines) and (not lines[i].strip() or _DOCINFO.match(lines[i])):
        i += 1  # file-wide fields such as ":tocdepth: 2"
    while i < len(lines):
        match = _EXPLICIT.match(lines[i])
        if match is None:
            if not _TABLE_BORDER.match(lines[i]):
                out.append(lines[i])
            i += 1
            continue
        indent, rest = len(match["indent"]), (match["rest"] or "").strip()
        directive = _DIRECTIVE.match(rest)
        i += 1
        if directive is None:
            # Target, substitution, footnote or comment. An empty ".." followed by a blank line
            # is an empty comment and does not own the block after it.
            if rest or (i < len(lines) and lines[i].strip()):
                i = _skip_body(lines, i, indent)
            continue
        name, argument = directive["name"].lower(), (directive["arg"] or "").strip()
        if name in _DROPPED:
            i = _skip_body(lines, i, indent)
            continue
        while i < len(lines) and _OPTION.match(lines[i]) and _indent(lines[i]) > indent:
            i += 1
        # The label is a paragraph of its own, so a literal block above cannot swallow the body.
        if name in _CODE:
            label = "::"
        elif name in _SILENT_ARGUMENT:
            continue
        elif argument and name not in _LABELS:
            label = argument
        else:
            label = f"{_LABELS.get(name, name.capitalize())} {argument}".rstrip() + ":"
        out.extend(["", " " * indent + label, ""])
    return out


def _adornment(line: str) -> str | None:
    """The line if it is a row of one punctuation character (a title's under/overline)."""
    row = line.rstrip()
    if len(row) < 2 or row[0] not in _PUNCTUATION or row != row[0] * len(row) or row == "::":
        return None
    return row


def _setext(row: str) -> bool:
    """Markdown lets a ``===`` or ``---`` underline be shorter than its title."""
    return row[0] in "=-" and len(row) >= 3


def _heading_at(lines: list[str], i: int) -> tuple[str, int, tuple[str, str | int]] | None:
    """The raw title starting at line ``i``, how many lines it spans and its style, if any."""
    line = lines[i]
    over = _adornment(line)
    if over:
        if i + 2 < len(lines):
            text, under = lines[i + 1].strip(), _adornment(lines[i + 2])
            if text and under and under[0] == over[0] and len(under) >= len(text):
                return text, 3, ("over", over[0])
        return None
    if line.strip() and _indent(line) == 0 and i + 1 < len(lines):
        under = _adornment(lines[i + 1])
        if under and (len(under) >= len(line.rstrip()) or _setext(under)):
            return line.strip(), 2, ("under", under[0])
    md = _MD_HEADING.match(line)
    return (md["text"], 1, ("#", len(line) - len(line.lstrip("#")))) if md else None


def split_sections(lines: list[str]) -> list[Section]:
    """Cut the lines at reST and Markdown headings; headings come out as plain text."""
    sections = [Section("")]
    fence: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        fence_match = _FENCE.match(line)
        if fence is None and not fence_match and (found := _heading_at(lines, i)):
            sections.append(Section(to_plain(found[0]), style=found[2]))
            i += found[1]
            continue
        if fence is None and fence_match:
            fence = fence_match["fence"]
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        if fence is not None or fence_match or not _adornment(line):
            sections[-1].lines.append(line)  # a bare punctuation row is a transition: noise
        i += 1
    return [s for s in sections if s.heading or any(line.strip() for line in s.lines)]


def _paragraphs(lines: list[str]) -> Iterator[list[str]]:
    """Runs of non-blank lines; a fenced code block stays whole across blank lines."""
    current: list[str] = []
    fence: str | None = None
    for line in lines:
        fence_match = _FENCE.match(line)
        if fence is None and fence_match:
            fence = fence_match["fence"]
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        if line.strip() or fence is not None:
            current.append(line)
        elif current:
            yield current
            current = []
    if current:
        yield current


def iter_blocks(lines: list[str]) -> Iterator[Block]:
    """Plain-text paragraphs and code blocks of one section, in order."""
    literal_indent: int | None = None  # indent of the paragraph that announced "::"
    for para in _paragraphs(lines):
        indent = min(_indent(line) for line in para if line.strip())
        if literal_indent is not None and indent > literal_indent:
            code = True
        else:
            literal_indent = None
            code = para[0].lstrip().startswith((">>>", "```", "~~~"))
        if not code and para[-1].rstrip().endswith("::"):
            literal_indent = _content_indent(para[-1])
            last = para[-1].rstrip()
            if last.strip() == "::":
                para = para[:-1]
            else:
                para = [*para[:-1], last[:-3].rstrip() if last.endswith(" ::") else last[:-1]]
        text = textwrap.dedent("\n".join(line.rstrip() for line in para)).strip("\n")
        if not code:
            text = to_plain(text)
        if text.strip():
            yield Block(text, code)


def _role_text(name: str, body: str) -> str:
    body = " ".join(body.split())
    titled = _TITLED_TARGET.match(body)
    if titled:
        body = titled["title"] or titled["target"]
    if body.startswith("!"):
        body = body[1:]
    if body.startswith("~"):
        body = body[1:].rsplit(".", 1)[-1]
    role = name.rsplit(":", 1)[-1]
    if role in ("pep", "rfc"):
        body = f"{role.upper()} {body}"
    return body


def to_plain(text: str) -> str:
    """Inline markup to the text a reader sees: roles, links, literals."""
    text = _ROLE.sub(lambda m: _role_text(m["name"], m["body"]), text)
    text = _LINK.sub(lambda m: m["text"], text)
    text = _LITERAL.sub(lambda m: m["text"], text)
    text = _NAMED_LINK.sub(lambda m: m["text"], text)
    text = _DEFAULT_ROLE.sub(lambda m: m["text"], text)
    return text.replace("\\ ", "").replace("\\*", "*")  # reST escapes
