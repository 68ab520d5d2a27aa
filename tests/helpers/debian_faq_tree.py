"""A tiny hand-made Debian FAQ for the ``debian-faq`` set's tests: three chapter pages and the
table of contents in the DocBook XHTML that Debian's debian-faq package ships (navigation bars,
``div.chapter``, ``div.toc``, nested ``div.section`` each opened by its ``div.titlepage``,
cross-references that carry their target's title, footnotes at the chapter's end, and the
``<stem>.html`` links to each ``<stem>.en.html``), laid out as ``make eval-data`` lays it out
(``<data>/debian-faq/FAQ``). The questions and answers are written for the tests."""

from __future__ import annotations

from pathlib import Path

_PAGE = """\
<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" \
"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd"><html \
xmlns="http://www.w3.org/1999/xhtml"><head><meta http-equiv="Content-Type" \
content="text/html; charset=UTF-8" /><title>{title}</title><link rel="stylesheet" \
type="text/css" href="debian.css" /><meta name="generator" content="DocBook XSL Stylesheets \
Vsnapshot" /></head><body><div class="navheader"><table width="100%" summary="Navigation \
header"><tr><th colspan="3" align="center">{title}</th></tr></table><hr /></div>\
<div class="{kind}"><div class="titlepage"><div><div><h1 class="title"><a id="{stem}"></a>\
{title}</h1></div></div></div>{body}</div><div class="navfooter"><hr /><table width="100%" \
summary="Navigation footer"><tr><td width="40%" align="left">{title} </td></tr></table></div>\
</body></html>
"""


def _section(anchor: str, level: int, title: str, body: str, *inner: str) -> str:
    return (
        f'<div class="section"><div class="titlepage"><div><div><h{level} class="title">'
        f'<a id="{anchor}"></a>{title}</h{level}></div></div></div>{body}{"".join(inner)}</div>'
    )


def _chapter(stem: str, title: str, toc: tuple[str, ...], body: str, kind: str = "chapter") -> str:
    """A chapter's page: its title, its table of contents (``toc``'s headings), ``body``."""
    return _PAGE.format(title=title, kind=kind, stem=stem, body=_toc(*toc) + body)


def _toc(*entries: str) -> str:
    items = "".join(
        f'<dt><span class="section"><a href="#x">{entry}</a></span></dt>' for entry in entries
    )
    heading = "<p><strong>Table of Contents</strong></p>"
    return f'<div class="toc">{heading}<dl class="toc">{items}</dl></div>'


CHOOSING = _chapter(
    "choosing",
    "Chapter 3. Choosing a Debian distribution",
    (
        "3.1. Which Debian distribution should I run?",
        "3.1.1. Can I move from stable to testing later?",
    ),
    "<p>\nDebian offers several distributions at once; this chapter helps you pick one.\n</p>"
    + '<p>\nThe archive layout is explained in <a class="xref" href="pkgtools.en.html#s8.2" '
    'title="8.2. How can I tell which package owns a file?">Section 8.2, “How can I tell '
    "which package owns a file?”</a>.\n</p>"
    + _section(
        "s3.1",
        2,
        "3.1. Which Debian distribution should I run?",
        '<p>\nMost servers are best served by <code class="literal">stable</code>, which '
        "only receives security fixes and serious corrections.\n</p>",
        _section(
            "s3.1.1",
            3,
            "3.1.1. Can I move from stable to testing later?",
            "<p>\nYes: point the sources list at the newer suite and run a full upgrade; the "
            "way back down is not supported.\n</p>",
        ),
        _section(
            "s3.1.2",
            3,
            "3.1.2. Why was my question left without an answer?",
            "",
        ),
        _section(
            "s3.1.3",
            3,
            "3.1.3. Does\nunstable ever get frozen?",
            "<p>\nNo. Only the suite that will become the next release is frozen, for a few "
            "months before it ships.\n</p>",
        ),
    ),
)

PKGTOOLS = _chapter(
    "pkgtools",
    "Chapter 8. The Debian package management tools",
    ("8.1. What programs manage packages?", "8.1.1. dpkg", "8.1.2. APT"),
    _section(
        "s8.1",
        2,
        "8.1. What programs does Debian provide for managing its packages?",
        '<p>\nThere are low-level tools and front ends built on them.<a id="idm1" '
        'href="#ftn.idm1" class="footnote"><sup class="footnote">[1]</sup></a>\n</p>',
        _section("s8.1.1", 3, "8.1.1. dpkg", "<p>\nThe low-level installer of .deb files.\n</p>"),
        _section(
            "s8.1.2",
            3,
            "8.1.2. APT",
            "<p>\nResolves dependencies and fetches packages from the mirrors.\n</p>",
        ),
    )
    + _section(
        "s8.2",
        2,
        "8.2. How can I tell which package owns a file?",
        '<pre class="screen">dpkg --search /usr/bin/less</pre><p>\nThe search prints the '
        "package name before a colon.\n</p>",
    )
    + '<div class="footnotes"><br /><hr width="100" align="left" /><div id="ftn.idm1" '
    'class="footnote"><p><a href="#idm1" class="para"><sup class="para">[1] </sup></a>Some '
    "front ends are graphical.</p></div></div>",
)

FAQINFO = _chapter(
    "faqinfo",
    "Chapter 16. General information about the FAQ",
    ("16.1. Authors", "16.2. Feedback"),
    _section("s16.1", 2, "16.1. Authors", "<p>\nMany volunteers wrote this document.\n</p>")
    + _section("s16.2", 2, "16.2. Feedback", "<p>\nReport mistakes as bugs.\n</p>"),
)

INDEX = _chapter(
    "index",
    "The Debian GNU/Linux FAQ",
    (
        "3.1. Which Debian distribution should I run?",
        "8.2. How can I tell which package owns a file?",
    ),
    "",
    kind="book",
)

PAGES = {"choosing": CHOOSING, "pkgtools": PKGTOOLS, "faqinfo": FAQINFO, "index": INDEX}


def write_faq(data: Path) -> Path:
    """The tree under ``data``; returns its ``FAQ`` folder."""
    faq = data / "debian-faq" / "FAQ"
    faq.mkdir(parents=True)
    for stem, html in PAGES.items():
        (faq / f"{stem}.en.html").write_text(html, encoding="utf-8")
        (faq / f"{stem}.html").symlink_to(f"{stem}.en.html")
    (faq / "debian.css").write_text("body { margin: 1em; }\n")
    return faq
