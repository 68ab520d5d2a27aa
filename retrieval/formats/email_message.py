"""E-mail (``.eml``) with the standard library's ``email`` package (``policy.default``).

The Subject is the title; From, To, Date and Subject open the text as a header block, so a
question about who wrote or when finds it. The body is the plain-text part, else the HTML part
made text. Text attachments (``text/*``) follow, each its own section "Attachment: <name>",
read by the parser of their file name's format when there is one. Nothing is fetched. The
blocks of the body and of all attachments together count against ``max_paragraphs``, checked
after each part.
"""

from __future__ import annotations

import email
from email import policy
from email.message import EmailMessage, Message

from retrieval.formats.document import Block, Document
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


def parse_eml(data: bytes, *, limits: ParseLimits = DEFAULT_LIMITS) -> Document:
    message = email.message_from_bytes(data, policy=policy.default)
    assert isinstance(message, EmailMessage)
    subject = " ".join(str(message.get("Subject", "")).split())
    headers = [f"{name}: {message[name]}" for name in _HEADERS if message.get(name)]
    blocks = [Block("\n".join(headers))] if headers else []
    body = message.get_body(preferencelist=("plain", "html"))
    if body is not None:
        blocks += [
            Block(b.text, (), code=b.code) for b in _as_document(body, "").blocks
        ]  # the body's own headings are noise in a mail; keep its text flat
    paragraphs = limits.tally("max_paragraphs")
    paragraphs.add(len(blocks))
    for part in message.iter_attachments():
        if part.get_content_maintype() != "text":
            continue
        name = part.get_filename() or "attachment"
        section = (f"Attachment: {name}",)
        attached = _as_document(part, name).blocks
        paragraphs.add(len(attached))
        blocks += [Block(b.text, section + b.path, code=b.code) for b in attached]
    if headers and len(blocks) == 1:
        blocks = []  # headers alone are not a document
    return Document("eml", title=subject, blocks=blocks)
