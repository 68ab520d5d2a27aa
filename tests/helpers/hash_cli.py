"""``ragtime`` (``app.cli.main``) as a process that embeds with the hash embedder, for tests
that run ingest or serve as real subprocesses without loading MiniLM.

``python -m tests.helpers.hash_cli ingest PATH ...`` or ``... serve --port P``. With
``CRASH_AT`` set, the process SIGKILLs itself at that point of an ingest, as a power cut or the
OOM killer would stop it (no ``finally``, no ``atexit``):

- ``embed:N``: on the Nth call that embeds chunks (files before it are staged, not published);
- ``before:STEP`` / ``after:STEP``: around one publish step of ``retrieval.store.publishing``
  (``write_snapshot_files``, ``rename_into_place``, ``point_current``, ``prune``).

Logging is configured before FAISS is imported, as ``ragtime`` configures it before a command
imports it: what a library logs as it loads shows as it would to a user (the ``retrieval``
imports wait in ``main``; ``crashes`` holds the rest).
"""

from __future__ import annotations

import os
import sys

from app.cli import commands as cli


def main(argv: list[str]) -> int:
    cli.configure_logging()
    from app.pipeline import services
    from tests.helpers.crashes import install

    embedder = install(os.environ.get("CRASH_AT", ""))
    services.default_embedder = lambda settings: embedder
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
