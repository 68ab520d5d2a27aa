"""A tiny hand-made GNU Emacs FAQ for the ``emacs-faq`` set's tests, in the Info format that
Debian's emacs-common ships (``efaq.info``: the preamble, nodes after ``\\x1f`` lines with their
``File: ..., Node: ...`` headers, titles underlined with ``*`` for the top and the chapters and
``=`` for the entries, menus, cross-references, a concept index with its control characters,
and the tag table), laid out as ``make eval-data`` lays it out (``<data>/emacs-faq/efaq.info``).
The questions and answers are written for the tests."""

from __future__ import annotations

from pathlib import Path

EFAQ = """\
This is efaq.info, produced by makeinfo version 6.8 from efaq.texi.

     This list of questions about a text editor may be copied freely.
INFO-DIR-SECTION Emacs
START-INFO-DIR-ENTRY
* Emacs FAQ: (efaq).            Frequently Asked Questions about Emacs.
END-INFO-DIR-ENTRY

\x1f
File: efaq.info,  Node: Top,  Next: Common requests,  Prev: (dir),  Up: (dir)

The GNU Emacs FAQ
*****************

This is the FAQ of a small test.

* Menu:

* Common requests::
* Key bindings::
* Concept index::

\x1f
File: efaq.info,  Node: Common requests,  Next: Key bindings,  Prev: Top,  Up: Top

1 Common requests
*****************

* Menu:

* Showing line numbers::
* Spell-checkers::
* Empty entry::

\x1f
File: efaq.info,  Node: Showing line numbers,  Next: Spell-checkers,  Up: Common requests

1.1 How do I make Emacs show the ‘line number’ of each line?
=============================================================

Turn on ‘display-line-numbers-mode’ in the buffer, or put
‘(global-display-line-numbers-mode)’ in your init file to have them
everywhere.

   The mode line can show the current line too (*note Key bindings::).

\x1f
File: efaq.info,  Node: Spell-checkers,  Next: Empty entry,  Up: Common requests

1.2 Spell-checkers
==================

Emacs checks the words of a buffer with an external program such as
Aspell or Hunspell; ‘M-x ispell-buffer’ walks through the doubtful ones.

\x1f
File: efaq.info,  Node: Empty entry,  Prev: Spell-checkers,  Up: Common requests

1.3 Why is this entry empty?
============================

\x1f
File: efaq.info,  Node: Key bindings,  Next: Concept index,  Prev: Common requests,  Up: Top

2 Key bindings
**************

Keys are bound in keymaps; a chapter of tests.

* Menu:

* Swapping keys::

\x1f
File: efaq.info,  Node: Swapping keys,  Up: Key bindings

2.1 How do I swap two keys that I don’t like?
=============================================

Use ‘keyboard-translate’, which changes a key before any keymap sees
it:

     (keyboard-translate ?\\C-t ?\\C-x)

\x1f
File: efaq.info,  Node: Concept index,  Prev: Key bindings,  Up: Top

Concept Index
*************

\x00\x08[index\x00\x08]
* Menu:

* line numbers, showing:                 Showing line numbers. (line  6)
* spelling:                              Spell-checkers.      (line  6)

\x1f
Tag Table:
Node: Top\x7f200
Node: Common requests\x7f400
\x1f
End Tag Table

\x1f
Local Variables:
coding: utf-8
End:
"""


def write_info(data: Path) -> Path:
    """The FAQ under ``data``; returns the Info file."""
    path = data / "emacs-faq" / "efaq.info"
    path.parent.mkdir(parents=True)
    path.write_text(EFAQ, encoding="utf-8")
    return path
