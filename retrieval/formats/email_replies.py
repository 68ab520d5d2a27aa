"""An e-mail body as its replies: who wrote each part of a thread that a message quotes.

A reply deep in a thread says nothing of who wrote it: "Agreed, let's move it to Friday." Mail
clients mark where a quoted message starts, and whose it is, in a few ways, which this module
reads from the body's plain text:

* an attribution line, "On Tue, 3 Mar 2026 at 10:02, Alice Smith <alice@example.org> wrote:"
  (Gmail, Apple Mail, Thunderbird; the line may wrap before "wrote:"), its quote below it
  marked with ``>`` (``>>`` for the message it quoted in turn);
* Outlook's header block, "-----Original Message-----" and/or "From: ...", "Sent: ...",
  "To: ...", "Subject: ..." lines, its quote unmarked below it.

``replies`` cuts the body at those marks into ``Reply`` parts, the first the message's own
(its ``From``), each with the text its author wrote, quote markers taken off. The parser makes
each part a section named after its author ("From Alice Smith"), so each chunk of a thread is
embedded and indexed under the subject and the name of who wrote it; the passage shown stays the
part's own text. A body without such marks is one part, the message's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.utils import parseaddr

#: "On <date>, <who> wrote:" (the date may hold commas: the author is what follows the last one
#: that is not inside the address); the line may wrap before "wrote:".
_ATTRIBUTION = re.compile(r"^On\s+(?P<when>.+),\s+(?P<who>[^,]+?)\s+wrote:\s*$", re.IGNORECASE)
_ORIGINAL = re.compile(r"^-{2,}\s*Original Message\s*-{2,}\s*$", re.IGNORECASE)
_HEADER = re.compile(r"^(?P<name>From|Sent|Date|To|Cc|Subject):\s*(?P<value>.*)$", re.IGNORECASE)
_QUOTE = re.compile(r"^(?:\s*>)+\s?")
#: Lines of an Outlook header block that may follow its "From:" line.
_HEADER_SPAN = 6


@dataclass(frozen=True)
class Reply:
    """One author's part of a message's body: who (a display name, else an address) and what
    they wrote."""

    author: str
    text: str

    @property
    def section(self) -> str:
        return f"From {self.author}" if self.author else ""


def author_of(address: str) -> str:
    """A display name, else the address, of a ``From`` value or an attribution's author."""
    name, mail = parseaddr(address.strip())
    return " ".join((name or mail or address).split()).strip("\"' ")


def _unquoted(line: str) -> str:
    return _QUOTE.sub("", line)


def _attribution(lines: list[str], i: int) -> tuple[str, int] | None:
    """The author of an attribution starting at line ``i``, and the lines it takes (1 or 2)."""
    line = _unquoted(lines[i]).strip()
    if not line.lower().startswith("on "):
        return None
    for taken in (1, 2):
        if taken == 2:
            if i + 1 >= len(lines):
                return None
            line = f"{line} {_unquoted(lines[i + 1]).strip()}"
        match = _ATTRIBUTION.match(line)
        if match:
            return author_of(match.group("who")), taken
    return None


def _outlook_header(lines: list[str], i: int) -> tuple[str, int] | None:
    """The author of an Outlook header block starting at line ``i`` ("-----Original
    Message-----", or a "From:" line followed by "Sent:"/"Date:" and "Subject:" lines), and
    the lines it takes."""
    start = i
    if _ORIGINAL.match(_unquoted(lines[i]).strip()):
        i += 1
        if i >= len(lines):
            return "", 1
    first = _HEADER.match(_unquoted(lines[i]).strip())
    if first is None or first.group("name").lower() != "from":
        return ("", i - start) if i > start else None
    seen = {"from"}
    end = i + 1
    while end < len(lines) and end - i <= _HEADER_SPAN:
        header = _HEADER.match(_unquoted(lines[end]).strip())
        if header is None:
            break
        seen.add(header.group("name").lower())
        end += 1
    if i == start and not ({"sent", "date"} & seen and "subject" in seen):
        return None  # a line that begins "From:" in prose, not a header block
    return author_of(first.group("value")), end - start


def replies(body: str, sender: str) -> list[Reply]:
    """``body``'s parts by author, the first the message's own (``sender``, its ``From``);
    parts with no text are left out."""
    lines = body.splitlines()
    parts: list[Reply] = []
    author, current = author_of(sender) if sender else "", []
    i = 0
    while i < len(lines):
        mark = _attribution(lines, i) or _outlook_header(lines, i)
        if mark is None:
            current.append(_unquoted(lines[i]))
            i += 1
            continue
        parts.append(Reply(author, "\n".join(current).strip()))
        author, taken = mark
        current = []
        i += taken
    parts.append(Reply(author, "\n".join(current).strip()))
    return [part for part in parts if part.text]
