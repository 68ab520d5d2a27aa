"""``python -m tests.helpers.cli_driver ...``: the ``ragtime`` CLI in a subprocess, embedding with
``tests.fakes.hash_embedder.HashEmbedder`` (no model), for tests that must run it in a process of
its own (a private mount namespace, a resource limit). ``check COLLECTION QUERY`` instead prints,
as JSON, what the store under ``RAGTIME_DATA_DIR`` holds and serves: its collections, its
``check()`` problems, each index's size, and the sources of a search's hits."""

from __future__ import annotations

import json
import sys

from app.cli import commands as cli
from app.pipeline import services
from app.settings import get_settings
from retrieval import DocumentStore
from tests.fakes.hash_embedder import HashEmbedder


def check(collection: str, query: str) -> dict[str, object]:
    store = DocumentStore(get_settings().store_path)
    store.open()
    try:
        embedder = HashEmbedder()
        embedder.load()
        hits = store.search(collection, embedder.embed([query])[0], 50)
        return {
            "collections": store.collections(),
            "problems": store.check(),
            "sources": sorted({hit.source for hit in hits}),
        }
    finally:
        store.close()


def main(argv: list[str]) -> int:
    if argv[:1] == ["check"]:
        print(json.dumps(check(argv[1], argv[2])))
        return 0
    services.default_embedder = lambda settings: HashEmbedder()
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
