"""An e-mail thread is cut into its replies, each under who wrote it, so that a reply deep in a
thread is embedded and indexed with its subject and author (issue 46 §1), read from real .eml
files as mail clients write them."""

from __future__ import annotations

from email.message import EmailMessage
from pathlib import Path

from retrieval.formats import parse_file
from retrieval.formats.email_replies import Reply, replies
from retrieval.ingest.chunking import chunk_document, embedding_input
from retrieval.search.bm25 import chunk_document as keyword_document

GMAIL_THREAD = """Agreed, let's book the lake house for Friday.

On Tue, 3 Mar 2026 at 10:02, Alice Smith <alice@example.org> wrote:
> The lake house has room for twelve and a projector.
>
> On Mon, 2 Mar 2026, Bob Stone <bob@example.org>
> wrote:
>> Can someone find a venue with a projector?
"""

OUTLOOK_THREAD = """Approved for the second quarter.

-----Original Message-----
From: Dana White <dana@example.org>
Sent: Monday, March 2, 2026 4:15 PM
To: Finance <finance@example.org>
Subject: Budget request

Please approve 4,000 EUR for the offsite.
"""


#: The same thread as Gmail writes it in HTML: each attribution a block of its own, each quote
#: a blockquote.
GMAIL_HTML_THREAD = """<div dir="ltr">Agreed, let's book the lake house for Friday.</div><br>
<div class="gmail_quote"><div dir="ltr" class="gmail_attr">On Tue, 3 Mar 2026 at 10:02, Alice
Smith &lt;<a href="mailto:alice@example.org">alice@example.org</a>&gt; wrote:<br></div>
<blockquote class="gmail_quote"><div>The lake house has room for twelve and a projector.</div>
<div class="gmail_quote"><div class="gmail_attr">On Mon, 2 Mar 2026, Bob Stone
&lt;bob@example.org&gt; wrote:<br></div><blockquote class="gmail_quote">Can someone find a
venue with a projector?</blockquote></div></blockquote></div>
"""


def write_eml(path: Path, body: str, *, html: bool = False) -> Path:
    message = EmailMessage()
    message["Subject"] = "Re: Offsite venue"
    message["From"] = "Carol Jones <carol@example.org>"
    message["To"] = "team@example.org"
    message["Date"] = "Wed, 04 Mar 2026 09:00:00 +0000"
    message.set_content(body, subtype="html" if html else "plain")
    path.write_bytes(message.as_bytes())
    return path


def test_each_quoted_reply_is_a_section_under_its_author(tmp_path: Path) -> None:
    document = parse_file(write_eml(tmp_path / "thread.eml", GMAIL_THREAD))
    by_section = {block.path: block.text for block in document.blocks if block.path}
    assert by_section == {
        ("From Carol Jones",): "Agreed, let's book the lake house for Friday.",
        ("From Alice Smith",): "The lake house has room for twelve and a projector.",
        ("From Bob Stone",): "Can someone find a venue with a projector?",
    }  # quote markers and attribution lines are gone; a wrapped "wrote:" is read too
    assert document.title == "Re: Offsite venue"


def test_a_reply_is_embedded_and_indexed_with_its_subject_and_author(tmp_path: Path) -> None:
    document = parse_file(write_eml(tmp_path / "thread.eml", GMAIL_THREAD))
    # Chunks small enough that each reply starts one (a long thread's replies do).
    chunks = chunk_document(document, "mail/thread.eml", max_tokens=24)
    deepest = next(c for c in chunks if "projector?" in c.text)
    assert embedding_input(deepest).startswith("Re: Offsite venue: From Bob Stone\n")
    assert "Bob Stone" in keyword_document(deepest.title, deepest.section, deepest.text)
    assert "Bob" not in deepest.text  # the passage shown and cited stays the reply's own text


def test_outlooks_header_block_starts_a_reply() -> None:
    assert replies(OUTLOOK_THREAD, "Erin Black <erin@example.org>") == [
        Reply("Erin Black", "Approved for the second quarter."),
        Reply("Dana White", "Please approve 4,000 EUR for the offsite."),
    ]


def test_prose_that_mentions_from_or_on_is_not_a_reply() -> None:
    body = (
        "From: the desk of the chair, a note.\nOn Monday we meet; bring the minutes.\n"
        "Once more wrote down."
    )
    assert replies(body, "carol@example.org") == [Reply("carol@example.org", body)]


def test_an_html_thread_is_cut_the_same_way(tmp_path: Path) -> None:
    document = parse_file(write_eml(tmp_path / "thread.eml", GMAIL_HTML_THREAD, html=True))
    sections = [block.path for block in document.blocks if block.path]
    assert sections == [("From Carol Jones",), ("From Alice Smith",), ("From Bob Stone",)]
