"""Metadata filters of a search: a source path prefix and file types (``Chunk.kind``).

A ``SearchFilter`` checks its values when it is made (``InvalidFilter``, 422, naming the field)
and says which chunks it keeps as a SQL condition over a snapshot's ``chunks`` table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from retrieval.errors import InvalidFilter

_KIND = re.compile(r"^[a-z0-9]{1,16}$")
MAX_PREFIX_CHARS = 1024
MAX_KINDS = 32


@dataclass(frozen=True)
class SearchFilter:
    """Keep chunks whose source starts with ``source_prefix`` (a path relative to the ingest
    root, as hits show it) and whose ``kind`` is one of ``kinds``; empty values keep all."""

    source_prefix: str = ""
    kinds: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        prefix = self.source_prefix
        if len(prefix) > MAX_PREFIX_CHARS:
            raise InvalidFilter(
                "source_prefix", f"is {len(prefix)} characters long; the limit is 1024"
            )
        if any(ord(c) < 32 or ord(c) == 127 for c in prefix):
            raise InvalidFilter("source_prefix", "must not hold control characters")
        if prefix.startswith("/") or "\\" in prefix:
            raise InvalidFilter(
                "source_prefix",
                f"sources are POSIX paths relative to the ingest root (as hits show them, "
                f"e.g. 'tutorial/'), got {prefix!r}",
            )
        if len(self.kinds) > MAX_KINDS:
            raise InvalidFilter("kind", f"lists {len(self.kinds)} file types; at most {MAX_KINDS}")
        for kind in self.kinds:
            if not _KIND.match(kind):
                raise InvalidFilter(
                    "kind",
                    f"file types are 1-16 lowercase letters or digits, as hits show them "
                    f"(e.g. 'md', 'pdf'), got {kind!r}",
                )

    @classmethod
    def of(cls, source_prefix: str | None, kind: str | Iterable[str] | None) -> SearchFilter:
        """From a request's optional fields: ``kind`` one type or several."""
        kinds = (kind,) if isinstance(kind, str) else tuple(kind or ())
        return cls(source_prefix or "", tuple(dict.fromkeys(kinds)))

    @property
    def active(self) -> bool:
        return bool(self.source_prefix or self.kinds)

    def sql(self, also_sources: Sequence[str] = ()) -> tuple[str, list[str]]:
        """``(condition, parameters)`` over the ``chunks`` table; ``1`` keeps every row. The
        prefix is a range on ``source`` (its index serves it), not a ``LIKE`` pattern; the
        prefix keeps ``also_sources`` too (the originals whose copies it keeps)."""
        clauses: list[str] = []
        params: list[str] = []
        if self.source_prefix:
            prefix = "source >= ? AND source < ?"
            if also_sources:
                prefix = f"({prefix} OR source IN ({','.join('?' * len(also_sources))}))"
            clauses.append(prefix)
            params += [self.source_prefix, self.source_prefix + "\U0010ffff", *also_sources]
        if self.kinds:
            clauses.append(f"kind IN ({','.join('?' * len(self.kinds))})")
            params += list(self.kinds)
        return (" AND ".join(clauses) or "1"), params

    def attributes(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.source_prefix:
            out["ragtime.search.filter.source_prefix"] = self.source_prefix
        if self.kinds:
            out["ragtime.search.filter.kind"] = ",".join(self.kinds)
        return out
