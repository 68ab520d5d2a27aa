"""One policy for loading models by id or path without ever hanging on a model hub.

A local directory loads as is. Anything else is a hub id, loaded from the local cache only
(``local_files_only=True``) unless ``HF_HUB_OFFLINE`` is explicitly set to a false value
("0", "false", "no", "off"): then sentence-transformers may download it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

_FALSE = frozenset({"0", "false", "no", "off"})


def hub_kwargs(model: str) -> dict[str, Any]:
    """Keyword arguments for ``SentenceTransformer``/``CrossEncoder`` loading ``model``."""
    if Path(model).expanduser().is_dir():
        return {}
    downloads_allowed = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _FALSE
    return {} if downloads_allowed else {"local_files_only": True}


def local_or_id(model: str) -> str:
    """A local directory as an absolute path string (``~`` expanded); an id unchanged."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.is_dir() else model
