"""E-mail (``.eml``) with the standard library's ``email`` package (``policy.default``).

The Subject is the title; From, To, Date and Subject open the text as a header block, so a
question about who wrote or when finds it. The body is the plain-text part, else the HTML part
made text, cut into the replies it quotes (``email_replies``): each part is a section named
after who wrote it ("From Alice Smith"), so a reply deep in a thread is embedded and indexed
under the subject and its author. Nothing is fetched.

Attachments: ``read_eml`` gives, beside the message's document, each attachment whose file name
``separate`` takes (in ingest: a name of a type ingest reads, ``.pdf``, ``.docx``, ``.png``...)
as an ``Attachment`` of its own, unread: ingest reads it as a file named
``<message>#<attachment name>`` (a forwarded message too, without its own attachments). Its
name is the last path component of the name the message gives, without control characters,
made unique within the message ("a (2).pdf"). A text attachment (``text/*``) is passed on as
UTF-8, whatever its declared charset. Other text attachments follow the body, each its own
section "Attachment: <name>", read as HTML, Markdown, reStructuredText or plain text by their
name or type. A message that carries attachments keeps its header block even without a body
(it names what they came with). The blocks of the body and of the inline attachments together
count against ``max_paragraphs``, checked after each part; each separate attachment is read
within the limits of a file of its own.
"""

from __future__ import annotations

import email
import unicodedata
from collections.abc import Callable
from email import policy
from email.message import EmailMessage, Message
from pathlib import PurePosixPath

from retrieval.formats.document import Attachment, Block, Document
from retrieval.formats.email_replies import replies
from retrieval.formats.html import html_to_document
from retrieval.formats.limits import DEFAULT_LIMITS, ParseLimits
from retrieval.formats.markup import parse_markup

_HEADERS = ("From", "To", "Cc", "Date", "Subject")


def _text_of(part: Message) -> str:
    assert isinstance(part, EmailMessage)
    content = part.get_content()
    return content.decode("utf-8", "replace") if isinstance(content, bytes) else str(content)


def _as_document(part: Message, name: str) -> Document:
    """A text part as a document: HTML made text, Markdown and reST by their headings."""
    text = _text_of(part)
    lower = name.lower()
    if part.get_content_subtype() == "html" or lower.endswith((".html", ".htm")):
        return html_to_document(text)
    if lower.endswith((".md", ".markdown")) or part.get_content_subtype() == "markdown":
        return parse_markup(text, "md")
    return parse_markup(text, "rst" if lower.endswith((".rst", ".rst.txt")) else "txt")


def _body_blocks(body: Message, sender: str) -> list[Block]:
    """The body's paragraphs, each under the section of the reply it belongs to ("From Alice
    Smith": ``email_replies``). The body's own headings are noise in a mail: within a reply
    its text stays flat."""
    text = _text_of(body)
    if body.get_content_subtype() == "html":
        text = "\n\n".join(block.text for block in html_to_document(text).blocks)
    return [
        Block(block.text, (reply.section,) if reply.section else (), code=block.code)
        for reply in replies(text, sender)
        for block in parse_markup(reply.text, "txt").blocks
    ]


#: The longest attachment name kept, in characters (its suffix kept when cut).
MAX_NAME_CHARS = 200


def _file_name(raw: str | None) -> str:
    """An attachment's file name as a source may name it: the last path component, NFC, no
    control characters, at most ``MAX_NAME_CHARS``; "" when nothing is left."""
    name = PurePosixPath((raw or "").replace("\\", "/")).name
    name = "".join(
        c for c in unicodedata.normalize("NFC", name) if unicodedata.category(c)[0] != "C"
    )
    name = name.strip()
    if len(name) > MAX_NAME_CHARS:
        suffix = PurePosixPath(name).suffix[:16]
        name = name[: MAX_NAME_CHARS - len(suffix)] + suffix
    return "" if name.startswith(".") else name


def _unique(name: str, taken: set[str]) -> str:
    """``name``, or ``stem (n)suffix`` with the first ``n`` not in ``taken`` (which takes it)."""
    candidate, n = name, 1
    while candidate.lower() in taken:
        n += 1
        path = PurePosixPath(name)
        candidate = f"{path.stem} ({n}){path.suffix}"
    taken.add(candidate.lower())
    return candidate


def _payload(part: Message) -> bytes | None:
    """An attachment's bytes: text as UTF-8, a forwarded message as its own bytes, anything
    else as transferred (None if none)."""
    if part.get_content_maintype() == "text":
        return _text_of(part).encode("utf-8")
    if part.get_content_type() == "message/rfc822" and part.is_multipart():
        inner = part.get_payload(0)
        return inner.as_bytes() if isinstance(inner, Message) else None
    data = part.get_payload(decode=True)
    return data if isinstance(data, bytes) else None


def read_eml(
    data: bytes,
    *,
    limits: ParseLimits = DEFAULT_LIMITS,
    separate: Callable[[str], bool] = lambda name: False,
) -> tuple[Document, list[Attachment]]:
    """The message as a document, and the attachments whose name ``separate`` takes."""
    message = email.message_from_bytes(data, policy=policy.default)
    assert isinstance(message, EmailMessage)
    subject = " ".join(str(message.get("Subject", "")).split())
    headers = [f"{name}: {message[name]}" for name in _HEADERS if message.get(name)]
    blocks = [Block("\n".join(headers))] if headers else []
    body = message.get_body(preferencelist=("plain", "html"))
    if body is not None:
        blocks += _body_blocks(body, str(message.get("From", "")))
    paragraphs = limits.tally("max_paragraphs")
    paragraphs.add(len(blocks))
    attachments: list[Attachment] = []
    names: set[str] = set()
    for part in message.iter_attachments():
        name = _file_name(part.get_filename())
        if name and separate(name):
            payload = _payload(part)
            if payload is not None:
                attachments.append(Attachment(_unique(name, names), payload))
            continue
        if part.get_content_maintype() != "text":
            continue
        section = (f"Attachment: {name or 'attachment'}",)
        attached = _as_document(part, name).blocks
        paragraphs.add(len(attached))
        blocks += [Block(b.text, section + b.path, code=b.code) for b in attached]
    if headers and len(blocks) == 1 and not attachments:
        blocks = []  # headers alone are not a document
    return Document("eml", title=subject, blocks=blocks), attachments


def parse_eml(
    data: bytes,
    *,
    limits: ParseLimits = DEFAULT_LIMITS,
    separate: Callable[[str], bool] = lambda name: False,
) -> Document:
    """The message as a document; the attachments ``separate`` takes are left out of it."""
    return read_eml(data, limits=limits, separate=separate)[0]
