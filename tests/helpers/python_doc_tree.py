"""A tiny hand-made Python-doc tree for the retrieval evaluation's tests: two FAQ pages and
three other documents, laid out as ``make eval-data`` lays out python3.11-doc
(``<data>/python3.11-doc/_sources``)."""

from __future__ import annotations

from pathlib import Path

PROGRAMMING_FAQ = """\
:tocdepth: 2

===============
Programming FAQ
===============

.. contents::

General Questions
=================

How do I sort a list in place?
------------------------------

Call the ``sort`` method of the list: it reorders the items and returns None.
Use ``sorted`` for a new sorted copy.

What is a :term:`lambda` expression?
------------------------------------

A small anonymous function written inline with the keyword lambda.

Objects
=======

Why is my empty heading skipped?
--------------------------------

How can I copy an object?
-------------------------

The copy module offers shallow copies with copy.copy and deep copies with copy.deepcopy.
"""

GENERAL_FAQ = """\
General FAQ
===========

Why is it called Python?
------------------------

The name comes from the comedy group Monty Python, not from the snake.
"""

DOCS = {
    "library/pickle.rst.txt": "pickle\n======\n\nThe pickle module serialises objects to bytes.\n",
    "library/turtle.rst.txt": "turtle\n======\n\nTurtle graphics draws shapes on a canvas.\n",
    "tutorial/floats.rst.txt": "Floating point\n==============\n\nFloats are binary fractions.\n",
}


def write_sources(data: Path) -> Path:
    """The tree under ``data``; returns its ``_sources`` folder."""
    sources = data / "python3.11-doc" / "_sources"
    (sources / "faq").mkdir(parents=True)
    (sources / "faq" / "programming.rst.txt").write_text(PROGRAMMING_FAQ)
    (sources / "faq" / "general.rst.txt").write_text(GENERAL_FAQ)
    for name, text in DOCS.items():
        (sources / name).parent.mkdir(parents=True, exist_ok=True)
        (sources / name).write_text(text)
    return sources
