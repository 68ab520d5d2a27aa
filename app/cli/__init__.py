"""The ``ragtime`` command: ``commands`` (the subcommands and ``main``), how a failure becomes
one line (``failures``), how ``--help`` shows each option's default (``parsing``), ``ragtime
ask`` (``ask``), ``ragtime eval`` (``evaluation``), ``ragtime reranker`` (``reranker``) and
ingest's progress line (``ingest_progress``)."""

from app.cli.commands import main

__all__ = ["main"]
