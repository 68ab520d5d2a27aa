"""``Recent``: a bounded map that keeps the entries used most recently, for the caches of what
does not change for a given key (a question's embedding and screen score, a passage's screen
verdict and sentence vectors). Thread-safe: stages fill them on their threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Recent(Generic[K, V]):
    """At most ``size`` entries (0: none kept); the least recently used goes first."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError(f"size must be 0 or more, got {size}")
        self.size = size
        self._kept: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value kept for ``key`` (now the most recently used), or None."""
        with self._lock:
            value = self._kept.get(key)
            if value is not None:
                self._kept.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            if not self.size:
                return
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)

    def __len__(self) -> int:
        return len(self._kept)
