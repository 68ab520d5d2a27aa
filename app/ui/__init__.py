"""The page people use, served by ragtime itself at ``/ui``: ask with a budget, see the
citations, the answer as it streams and the request's waterfall; search with its modes and
filters. ``install`` adds it to the app."""

from app.ui.page import install

__all__ = ["install"]
