"""A directory the processes of one ``ragtime serve`` share: made before they start, named in the
environment they inherit, removed after they stop (their metrics: ``metrics``; what their
admission learned: ``budget.door.peers``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path


@contextlib.contextmanager
def fresh_shared_dir(
    prefix: str, env_name: str, also: Mapping[str, str] | None = None
) -> Iterator[Path]:
    """A fresh directory named ``prefix...``, in ``env_name`` (with ``also``'s variables) for the
    block; the variables are unset and the directory removed after."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    names = {env_name: str(path), **(also or {})}
    os.environ.update(names)
    try:
        yield path
    finally:
        for name in names:
            os.environ.pop(name, None)
        shutil.rmtree(path, ignore_errors=True)
